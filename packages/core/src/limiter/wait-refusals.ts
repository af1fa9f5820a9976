import { emptyRefusal } from '../algorithms/decision'
import type { Decision, LimitSpec } from '../types'

/*
 * How a wait ends refused: which refusals end it at once, and the decision it reports when it ends
 * without an admission (at its deadline, or on abort). That decision was counted nowhere, so it is
 * built from what the queue last heard rather than asked of the store.
 */

/**
 * A refusal that waiting cannot change: the failure policy's `deny` (returned as `consume` returns
 * it), or a cost larger than a limit can ever admit.
 */
export function isFinal(d: Decision, cost: number, max: number, host: { limitsOf(max: number): readonly LimitSpec[] }): boolean {
  if (d.source === 'deny') return true
  for (const limit of host.limitsOf(max)) if (cost > limit.burst) return true
  return false
}

/** A wait's refusal when its queue has no decision yet: it says only which limit it was. */
export function untried(limit: LimitSpec, key: string, cost: number, now: number): Decision {
  return emptyRefusal(limit, key, now, 'store', cost)
}

/** The queue's last decision `d` as of `now`, refused, with this wait's cost; `retryAfterMs` is the time left until the queue's next try. */
export function asRefused(d: Decision, cost: number, now: number): Decision {
  const retryAfterMs = d.allowed ? 0 : Math.max(1, d.at + d.retryAfterMs - now)
  const refused: Decision = {
    allowed: false,
    limit: d.limit,
    remaining: 0,
    count: d.count,
    resetAt: Math.max(d.resetAt, now + retryAfterMs),
    retryAfterMs,
    at: now,
    key: d.key,
    policy: d.policy,
    source: d.source,
    cost,
  }
  if (d.limits !== undefined) refused.limits = d.limits.map((l) => asRefused(l, cost, now))
  return refused
}
