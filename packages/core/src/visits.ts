import type { Decision } from './types'

/**
 * Records a decision where a framework's users read it (`req.rateLimit`, the last; `req.rateLimits`,
 * all of them in order) on `holder` (the request, or Koa's `ctx.state`); returns every decision so far.
 */
export function recordDecision(holder: { rateLimit?: Decision; rateLimits?: Decision[] }, decision: Decision): Decision[] {
  holder.rateLimit = decision
  const all = holder.rateLimits
  if (all !== undefined) {
    all.push(decision)
    return all
  }
  const first = [decision]
  holder.rateLimits = first
  return first
}

/** Property where `firstVisit` marks a request. */
export const VISITED = Symbol('tollgate.visitedBy')
type Visited = { [VISITED]?: object | object[] }

/** True the first time `limiter` meets this request object; the mark is a property of the request. */
export function firstVisit(request: unknown, limiter: object): boolean {
  const r = request as Visited
  const next = withVisitor(r[VISITED], limiter)
  if (next === undefined) return false
  r[VISITED] = next
  return true
}

/**
 * The limiters that have met a request (`seen`, as kept by the adapter), with `limiter` added;
 * undefined when it was there already. For an adapter that keeps the marks somewhere of its own.
 */
export function withVisitor(seen: object | object[] | undefined, limiter: object): object | object[] | undefined {
  if (seen === undefined) return limiter
  if (seen === limiter) return undefined
  if (!Array.isArray(seen)) return [seen, limiter]
  if (seen.includes(limiter)) return undefined
  seen.push(limiter)
  return seen
}
