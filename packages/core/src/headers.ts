import type { Decision, HeaderStyle } from './types'

/** Seconds until the window resets, rounded up: a client waiting this long is never early. */
export function secondsLeft(decision: Decision): number {
  return Math.max(0, Math.ceil((decision.resetAt - decision.at) / 1000))
}

function windowSeconds(windowMs: number): number {
  return Math.max(1, Math.ceil(windowMs / 1000))
}

/**
 * One draft-8 `RateLimit-Policy` member. A concurrency limit has a quota of requests in flight, not
 * per window: it carries the draft's quota unit `qu="concurrent-requests"` (§2.1.3) and no `w`, which
 * the draft makes optional and which would read as a window the quota resets in.
 */
function policyItem(name: string, d: Decision): string {
  const unit = d.policy.quotaUnit
  return unit === undefined ? `"${name}";q=${d.limit};w=${windowSeconds(d.policy.windowMs)}` : `"${name}";q=${d.limit};qu="${unit}"`
}

/** Each policy's `RateLimit-Policy` member and the start of its `RateLimit` member, rendered once (policies are long-lived and frozen). */
const policyItems = new WeakMap<object, { item: string; head: string }>()
export function policyParts(d: Decision): { item: string; head: string } {
  let parts = policyItems.get(d.policy)
  if (parts === undefined) {
    parts = { item: policyItem(d.policy.name, d), head: `"${d.policy.name}";r=` }
    policyItems.set(d.policy, parts)
  }
  return parts
}

/**
 * A header record's field name in lower case, without building a string: for a framework that
 * lower-cases every name it is given (fastify), a name already in lower case costs no allocation.
 * A switch over the names the records below use, not a lookup in an object of them: the names vary at
 * one call site, which made that lookup a megamorphic keyed load (bench/profile.mjs shows it), where
 * these comparisons are of internalized strings.
 */
export function lowerHeaderName(name: string): string {
  switch (name) {
    case 'RateLimit-Policy':
      return 'ratelimit-policy'
    case 'RateLimit':
      return 'ratelimit'
    case 'Retry-After':
      return 'retry-after'
    case 'Cache-Control':
      return 'cache-control'
    case 'RateLimit-Limit':
      return 'ratelimit-limit'
    case 'RateLimit-Remaining':
      return 'ratelimit-remaining'
    case 'RateLimit-Reset':
      return 'ratelimit-reset'
    case 'X-RateLimit-Limit':
      return 'x-ratelimit-limit'
    case 'X-RateLimit-Remaining':
      return 'x-ratelimit-remaining'
    case 'X-RateLimit-Reset':
      return 'x-ratelimit-reset'
    default:
      return name.toLowerCase()
  }
}

/**
 * The decision that speaks for the request where a header shape has room for one limit only:
 * a refusing one (the longest wait), else the one with the least left.
 */
export function decisive(decisions: readonly Decision[]): Decision {
  let pick = decisions[0]!
  for (let i = 1; i < decisions.length; i++) {
    const d = decisions[i]!
    if (pick.allowed ? !d.allowed || d.remaining < pick.remaining : !d.allowed && d.retryAfterMs > pick.retryAfterMs) pick = d
  }
  return pick
}

function names(decisions: readonly Decision[]): string[] {
  const seen = new Map<string, number>()
  return decisions.map((d) => {
    // Two limits with the same shape (say a global and a route limit of 10/s) still need distinct
    // list members, or a client could not tell which remaining belongs to which.
    const n = (seen.get(d.policy.name) ?? 0) + 1
    seen.set(d.policy.name, n)
    return n === 1 ? d.policy.name : `${d.policy.name}-${n}`
  })
}

/**
 * The response header record for the decisions made on one request (one per limit that applied).
 * Pure: the same decisions give the same headers in every adapter.
 *
 * - draft-8 (draft-ietf-httpapi-ratelimit-headers-08 and later, §4 and §5): structured-field lists
 *   `RateLimit-Policy: "10-per-1s";q=10;w=1` and `RateLimit: "10-per-1s";r=3;t=1`, one member per limit.
 * - draft-7: `RateLimit-Policy: 10;w=1` and the combined `RateLimit: limit=10, remaining=3, reset=1`.
 * - draft-6: `RateLimit-Policy`, `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`.
 * - legacy: `X-RateLimit-Limit/-Remaining/-Reset`, the reset in epoch seconds as express-rate-limit sends it.
 * - a concurrency limit (algorithm "concurrency"): draft-8 `"3-concurrent";q=3;qu="concurrent-requests"`
 *   (draft-6/7 keep their required `w`, the longest a slot is held), the remaining the free slots, and
 *   the reset a short look-again delay: a slot frees whenever a request ends.
 * - refused: `Retry-After` in whole seconds, rounded up so it is never earlier than the reset, and
 *   `Cache-Control: no-store` so no cache replays a 429 to a client whose window has reset.
 */
export function rateLimitHeaders(decisions: readonly Decision[], style: HeaderStyle | false, legacy: boolean): Record<string, string> {
  const only = decisions.length === 1 ? decisions[0]! : undefined
  if (only !== undefined && style === 'draft-8' && !legacy && !only.allowed && only.remaining === 0 && only.limits === undefined) {
    return refusedHeaders(only)
  }
  return buildHeaders(decisions, style, legacy)
}

/**
 * The record for a refusal under one limit, in the default style: the same for every refused request of
 * that policy in the same second (r=0, and t and Retry-After count whole seconds), so a flood of 429s
 * reuses one frozen record per policy instead of building it per request.
 */
const refusedByPolicy = new WeakMap<object, { t: number; retryAfter: number; headers: Record<string, string> }>()
function refusedHeaders(d: Decision): Record<string, string> {
  const t = secondsLeft(d)
  const retryAfter = Math.max(1, Math.ceil(d.retryAfterMs / 1000))
  const cached = refusedByPolicy.get(d.policy)
  if (cached !== undefined && cached.t === t && cached.retryAfter === retryAfter) return cached.headers
  const headers = Object.freeze(buildHeaders([d], 'draft-8', false))
  refusedByPolicy.set(d.policy, { t, retryAfter, headers })
  return headers
}

function anyLimits(decisions: readonly Decision[]): boolean {
  for (let i = 0; i < decisions.length; i++) if (decisions[i]!.limits !== undefined) return true
  return false
}

function buildHeaders(decisions: readonly Decision[], style: HeaderStyle | false, legacy: boolean): Record<string, string> {
  const headers: Record<string, string> = {}
  if (decisions.length === 0) return headers
  // A limiter with several limits returns its decisive decision carrying all of them.
  if (anyLimits(decisions)) decisions = decisions.flatMap((d) => d.limits ?? [d])
  const main = decisive(decisions)
  if (style === 'draft-8') {
    if (decisions.length === 1) {
      const d = decisions[0]!
      const { item, head } = policyParts(d)
      headers['RateLimit-Policy'] = item
      headers.RateLimit = `${head}${d.remaining};t=${secondsLeft(d)}`
    } else {
      const listed = names(decisions)
      headers['RateLimit-Policy'] = decisions.map((d, i) => policyItem(listed[i]!, d)).join(', ')
      headers.RateLimit = decisions.map((d, i) => `"${listed[i]}";r=${d.remaining};t=${secondsLeft(d)}`).join(', ')
    }
  } else if (style === 'draft-7') {
    headers['RateLimit-Policy'] = decisions.map((d) => `${d.limit};w=${windowSeconds(d.policy.windowMs)}`).join(', ')
    headers.RateLimit = `limit=${main.limit}, remaining=${main.remaining}, reset=${secondsLeft(main)}`
  } else if (style === 'draft-6') {
    headers['RateLimit-Policy'] = decisions.map((d) => `${d.limit};w=${windowSeconds(d.policy.windowMs)}`).join(', ')
    headers['RateLimit-Limit'] = String(main.limit)
    headers['RateLimit-Remaining'] = String(main.remaining)
    headers['RateLimit-Reset'] = String(secondsLeft(main))
  }
  if (legacy) {
    headers['X-RateLimit-Limit'] = String(main.limit)
    headers['X-RateLimit-Remaining'] = String(main.remaining)
    headers['X-RateLimit-Reset'] = String(Math.ceil(main.resetAt / 1000))
  }
  if (!main.allowed) {
    headers['Retry-After'] = String(Math.max(1, Math.ceil(main.retryAfterMs / 1000)))
    headers['Cache-Control'] = 'no-store'
  }
  return headers
}
