import { formatDuration } from './duration'
import type { Decision, DecisionSource, Policy } from './types'

/**
 * The algorithms a limiter can use. All share one store protocol (`ConsumeCall` in, two numbers per
 * limit out), implemented once in memory (memory-store.ts) and once as a Lua script per algorithm
 * (redis-commands.ts) with the same arithmetic, so both give the same decisions for the same requests.
 *
 * Time: the limiter's clock (`now`, epoch ms from the Node process) is passed to the store, never read
 * from Redis, so memory and Redis agree exactly and tests can inject time. Processes sharing a Redis
 * should keep their clocks in sync (NTP); skew shifts window edges by the skew, never more.
 */
export type AlgorithmName = 'fixed-window' | 'sliding-window' | 'gcra' | 'sliding-log'

export const ALGORITHMS: readonly AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log']

/** One limit of a limiter, normalised. */
export interface LimitSpec {
  readonly max: number
  readonly windowMs: number
  /** GCRA only: requests that may arrive at once (the bucket size). */
  readonly burst: number
  /** Used in store keys when a limiter has several limits, e.g. "1s". */
  readonly label: string
  readonly policy: Policy
}

/** One atomic check-and-update: all limits admit the request, and then all count it, or none does. */
export interface ConsumeCall {
  readonly algorithm: AlgorithmName
  /** `<prefix>{<client key>}` */
  readonly base: string
  readonly limits: readonly LimitSpec[]
  readonly cost: number
  readonly now: number
  /** Unique per call: names the sliding-log entries this call adds, so a refund removes exactly them. */
  readonly id: string
}

/**
 * The store's answer. `values` holds two numbers per limit, whose meaning depends on the algorithm:
 * - fixed-window:   [count before, count after] (after = before when refused)
 * - sliding-window: [previous window's count, current window's count before]
 * - gcra:           [TAT before (at least now), TAT after admitting], in ms, fractional when
 *                   window / max is not a whole number of ms
 * - sliding-log:    [entries before, timestamp of the entry whose expiry frees enough room]
 */
export interface ConsumeResult {
  allowed: boolean
  values: number[]
}

export function makeLimit(max: number, windowMs: number, burst: number | undefined, name: string | undefined): LimitSpec {
  const label = formatDuration(windowMs)
  const policy: Policy = Object.freeze({ name: name ?? `${max}-per-${label}`, limit: max, windowMs })
  return Object.freeze({ max, windowMs, burst: burst ?? max, label, policy })
}

/** Key stem of limit `i`: the plain base for a single limit (so the default key stays `<prefix>{<client>}:<window>`). */
export function stem(call: Pick<ConsumeCall, 'base' | 'limits'>, i: number): string {
  return call.limits.length === 1 ? call.base : `${call.base}:${call.limits[i]!.label}`
}

/** The store keys one call touches, in the order the Redis scripts take them. */
export function keysOf(call: ConsumeCall): string[] {
  const keys: string[] = []
  for (let i = 0; i < call.limits.length; i++) {
    const s = stem(call, i)
    const w = Math.floor(call.now / call.limits[i]!.windowMs)
    if (call.algorithm === 'fixed-window') keys.push(`${s}:${w}`)
    else if (call.algorithm === 'sliding-window') keys.push(`${s}:${w}`, `${s}:${w - 1}`)
    else if (call.algorithm === 'gcra') keys.push(`${s}:gcra`)
    else keys.push(`${s}:log`)
  }
  return keys
}

/** ARGV of the Redis scripts: cost, now, id, then max, windowMs, burst per limit. */
export function argsOf(call: ConsumeCall): Array<string | number> {
  const args: Array<string | number> = [call.cost, call.now, call.id]
  for (const l of call.limits) args.push(l.max, l.windowMs, l.burst)
  return args
}

/**
 * Turns the store's numbers for limit `i` into a decision. Shared by every store, so a decision
 * depends only on the numbers, never on where they came from.
 */
export function decisionOf(call: ConsumeCall, result: ConsumeResult, i: number, clientKey: string, source: DecisionSource): Decision {
  const { max, windowMs: W, burst } = call.limits[i]!
  const { now, cost } = call
  const a = result.values[2 * i]!
  const b = result.values[2 * i + 1]!
  const windowEnd = (Math.floor(now / W) + 1) * W
  let fits: boolean
  let count: number
  let remaining: number
  let resetAt: number
  let retryAfterMs = 0
  switch (call.algorithm) {
    case 'fixed-window': {
      fits = a + cost <= max
      count = result.allowed ? b : a + cost
      remaining = Math.max(0, max - (result.allowed ? b : a))
      resetAt = windowEnd
      if (!fits) retryAfterMs = windowEnd - now
      break
    }
    case 'sliding-window': {
      // Cloudflare's estimate: the previous window's count weighted by how much of it still overlaps
      // the sliding window, plus the current count. Compared in integers: prev*(W-e) + cur*W ≤ max*W.
      const e = now - Math.floor(now / W) * W
      const cur = result.allowed ? b + cost : b
      fits = a * (W - e) + (b + cost) * W <= max * W
      count = Math.ceil((a * (W - e)) / W) + (result.allowed ? cur : b + cost)
      remaining = Math.max(0, Math.floor((max * W - a * (W - e) - cur * W) / W))
      resetAt = windowEnd
      if (!fits) retryAfterMs = slidingRetry(a, b, cost, max, W, e)
      break
    }
    case 'gcra': {
      // Generic cell rate algorithm (as redis-cell's CL.THROTTLE): one emission interval T = W / max
      // per unit, a request fits while its theoretical arrival time stays within burst × T of now.
      // T is rarely a whole number of ms, so the TATs are brought back to whole units of 1/max ms
      // (what the stores count in) and compared as integers: with a floating T = 333.33…, a ratio
      // such as (burst × T − (TAT − now)) / T can land just below a whole number and floor one unit
      // short. Rounding recovers the stores' exact value whenever T is whole (the TATs are then whole
      // ms) and otherwise while max < 4096: a TAT near today's epoch ms holds its fraction to 2^-13 ms.
      if (max > 0) {
        const before = Math.max(0, Math.round((a - now) * max))
        const after = Math.max(0, Math.round((b - now) * max))
        const full = burst * W
        fits = after <= full
        const tat = result.allowed ? after : before
        remaining = Math.max(0, Math.floor((full - tat) / W))
        resetAt = now + Math.ceil(tat / max)
        if (!fits) retryAfterMs = Math.ceil((after - full) / max)
      } else {
        fits = false
        remaining = 0
        resetAt = now
        retryAfterMs = W
      }
      count = burst - remaining
      break
    }
    default: {
      // sliding-log: exact; `a` entries in the last W ms, `b` the entry whose expiry makes room.
      fits = a + cost <= max
      count = result.allowed ? a + cost : a + cost
      remaining = Math.max(0, max - (result.allowed ? a + cost : a))
      resetAt = a === 0 && result.allowed ? now + W : b + W
      if (!fits) retryAfterMs = cost > max ? W : Math.max(1, b + W - now)
    }
  }
  // All-or-nothing: a limit that fits still refuses when another limit refused the request.
  const allowed = result.allowed
  if (!allowed && retryAfterMs === 0) retryAfterMs = 1
  return {
    allowed,
    limit: max,
    remaining: allowed ? remaining : fits ? remaining : 0,
    count,
    resetAt: allowed ? resetAt : Math.max(resetAt, now + retryAfterMs),
    retryAfterMs: allowed ? 0 : retryAfterMs,
    at: now,
    key: clientKey,
    policy: call.limits[i]!.policy,
    source,
    cost,
  }
}

/** Smallest wait after which a sliding-window request of `cost` fits, with no other traffic. */
function slidingRetry(prev: number, cur: number, cost: number, max: number, W: number, e: number): number {
  if (cost > max) return 2 * W - e
  if (cur + cost <= max) {
    // Only the previous window's weight is in the way: wait until enough of it has slid out.
    return Math.max(1, Math.ceil(W - e - ((max - cur - cost) * W) / prev))
  }
  // Wait for the next window, where the current count becomes the weighted previous one.
  const into = cur === 0 ? 0 : Math.max(0, Math.ceil(W - ((max - cost) * W) / cur))
  return W - e + into
}

/** The decisive decision of a multi-limit result: the first refusing limit, else the one with least left. */
export function pickDecision(decisions: Decision[]): Decision {
  let pick = decisions[0]!
  for (let i = 1; i < decisions.length; i++) {
    const d = decisions[i]!
    if (pick.allowed ? !d.allowed || d.remaining < pick.remaining : !d.allowed && d.retryAfterMs > pick.retryAfterMs) pick = d
  }
  return pick
}
