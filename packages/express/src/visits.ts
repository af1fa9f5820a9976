import { firstVisit } from '@tollgate/core/adapter'

/*
 * Which limiters have met an Express request, so that a limiter mounted on the app and on a route
 * counts it once. The marks go in `res.locals`, the object Express gives every response for the
 * request's own data, not on the request: Express re-prototypes every request
 * (`setPrototypeOf(req, app.request)`), after which V8 gives each request a hidden class of its own,
 * so every property added to one copies that class and its property descriptors. `res.locals` is
 * created with no prototype and is a dictionary from the start, so one more key costs one hash
 * insert. Under a symbol, templates and `JSON.stringify(res.locals)` never see it.
 */

/** The parts of an Express request read here, typed structurally (loaded on platform-fastify too, by @tollgate/nestjs). */
type Request = object & { res?: { locals?: unknown } }

const MARKS = Symbol('tollgate.visitedBy')
type Marks = { [MARKS]?: object | object[] }

/**
 * True the first time `limiter` meets this request. A request with no `res.locals` object (not set up
 * by Express, or replaced by something that is not an object) is marked as the other adapters mark
 * theirs. Code that replaces `res.locals` with another object between two limiters hides the earlier
 * marks from the later one, which then counts the request again: the Express guide asks to add to
 * `res.locals` instead, as Express's own documentation does.
 */
export function expressVisit(req: Request, limiter: object): boolean {
  const locals: unknown = req.res?.locals
  if (typeof locals !== 'object' || locals === null) return firstVisit(req, limiter)
  const marks = locals as Marks
  const seen = marks[MARKS]
  if (seen === undefined) marks[MARKS] = limiter
  else if (seen === limiter) return false
  else if (!Array.isArray(seen)) marks[MARKS] = [seen, limiter]
  else if (seen.includes(limiter)) return false
  else seen.push(limiter)
  return true
}
