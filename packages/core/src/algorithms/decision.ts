import { decisive } from '../headers'
import type { Decision, DecisionSource, LimitSpec, StoreCall, StoreResult } from '../types'
import type { Algorithm } from './algorithm'
import type { Verdict } from './protocol'

/*
 * The store's numbers to a Decision, written once for every algorithm and store (as envoy's
 * base_limiter): a decision depends only on the numbers, never on where they came from.
 */

/** One verdict at a time: the mapping is synchronous, so a shared scratch object saves an allocation per decision. */
const scratch: Verdict = { fits: false, count: 0, remaining: 0, resetAt: 0, retryAfterMs: 0 }

/**
 * The decision for one limit. `admitted` is the store's answer for the whole call: a limit that fits
 * still refuses when another limit refused the request (all-or-nothing).
 */
export function decide(
  algorithm: Algorithm,
  limit: LimitSpec,
  a: number,
  b: number,
  admitted: boolean,
  cost: number,
  now: number,
  key: string,
  source: DecisionSource,
): Decision {
  algorithm.verdict(scratch, limit, a, b, cost, now, admitted)
  const { fits, remaining, resetAt } = scratch
  const retryAfterMs = admitted ? 0 : Math.max(1, scratch.retryAfterMs)
  return {
    allowed: admitted,
    limit: limit.max,
    remaining: admitted || fits ? remaining : 0,
    count: scratch.count,
    resetAt: admitted ? resetAt : Math.max(resetAt, now + retryAfterMs),
    retryAfterMs,
    at: now,
    key,
    policy: limit.policy,
    source,
    cost,
  }
}

/**
 * What `peek` reports for one limit from a read (a call of cost 0): whether a request of one unit
 * would be admitted now, what is left, and `count`, the units used (at most the limit's capacity, so
 * the fast path's count of refused requests reads as the script path's). Counts nothing.
 */
export function peekAt(algorithm: Algorithm, limit: LimitSpec, a: number, b: number, now: number, key: string): Decision {
  algorithm.verdict(scratch, limit, a, b, 1, now, false)
  const { fits, resetAt } = scratch
  const remaining = fits ? scratch.remaining : 0
  const retryAfterMs = fits ? 0 : Math.max(1, scratch.retryAfterMs)
  return {
    allowed: fits,
    limit: limit.max,
    remaining,
    count: Math.max(0, limit.burst - remaining),
    resetAt: fits ? resetAt : Math.max(resetAt, now + retryAfterMs),
    retryAfterMs,
    at: now,
    key,
    policy: limit.policy,
    source: 'store',
    cost: 0,
  }
}

/**
 * The decision of a call from the store's answer: one per limit, the decisive one carrying them all
 * when there are several. With per-limit keys (`call.keys`) each limit's decision reports its own key,
 * and the decision as a whole the request's client key, `key`.
 */
export function decisionOf(algorithm: Algorithm, call: StoreCall, result: StoreResult, key: string, source: DecisionSource): Decision {
  const { limits, cost, now, keys } = call
  const { values, allowed } = result
  return combine(limits.length, key, keys, (i, k) =>
    decide(algorithm, limits[i]!, values[2 * i]!, values[2 * i + 1]!, allowed, cost, now, k, source),
  )
}

/** What `peek` reports from a read (a call of cost 0), for every limit of the call. */
export function peekOf(algorithm: Algorithm, call: StoreCall, result: StoreResult, key: string): Decision {
  const { limits, now, keys } = call
  const { values } = result
  return combine(limits.length, key, keys, (i, k) => peekAt(algorithm, limits[i]!, values[2 * i]!, values[2 * i + 1]!, now, k))
}

function combine(n: number, key: string, keys: readonly string[] | undefined, at: (i: number, key: string) => Decision): Decision {
  if (keys === undefined) {
    if (n === 1) return at(0, key)
    const all = Array.from({ length: n }, (_, i) => at(i, key))
    return { ...decisive(all), limits: all }
  }
  const all = Array.from({ length: n }, (_, i) => at(i, keys[i]!))
  return { ...decisive(all), key, limits: all }
}

/** A refusal that counted nothing and suggests no wait: nothing used, nothing left, reset now. */
export function emptyRefusal(limit: LimitSpec, key: string, now: number, source: DecisionSource, cost: number): Decision {
  return {
    allowed: false,
    limit: limit.max,
    remaining: 0,
    count: 0,
    resetAt: now,
    retryAfterMs: 0,
    at: now,
    key,
    policy: limit.policy,
    source,
    cost,
  }
}

/** The decision for a client on the deny list: refused with no wait to suggest, counted nowhere. */
export function deniedDecision(limit: LimitSpec, key: string, now: number): Decision {
  const decision = emptyRefusal(limit, key, now, 'denyList', 0)
  decision.denied = true
  return decision
}
