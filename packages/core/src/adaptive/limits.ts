/*
 * How the adaptive concurrency limit follows measured latency (gate.ts feeds it). Each algorithm sees one
 * interval's samples at a time (a tenth of a second, or more when requests are few), not each request:
 * one slow request among many moves nothing, and a decision costs a comparison, not a computation.
 *
 * What every algorithm compares against is the service's latency without load, the `baseline`: the
 * lowest mean of the intervals that measured it unqueued over the last baselineWindowMs (30 s by default;
 * gate.ts, adjust). A service that became slower for good (a slower dependency) moves it up once the
 * window has passed. The probe that keeps it true under sustained overload holds the limit at half
 * of itself for two intervals once it has bound the traffic for ten seconds, never down to a handful of
 * requests.
 */

/** One interval's measurements. */
export interface Interval {
  /** Mean latency of the requests that completed in it, ms. */
  readonly meanMs: number
  /** The service's latency without load (see above), ms. */
  readonly baselineMs: number
  /** The most requests in flight at once during the interval. */
  readonly peakInflight: number
  /** Requests that ended as overload (a timeout, or a 503 of the service's own), or an event loop too busy. */
  readonly overloaded: boolean
}

export interface LimitAlgorithm {
  /** The next limit, from the current one and an interval's measurements. */
  next(limit: number, interval: Interval): number
}

export type LimitAlgorithmName = 'gradient2' | 'aimd' | 'vegas'

/**
 * Gradient2 (Netflix concurrency-limits): the limit scales by the ratio of the baseline latency (times a
 * tolerance) to the current one, clamped to [0.5, 1], plus a small queue allowance (√limit / 2, from 1 to 4)
 * so it keeps probing upwards, smoothed. It does not grow while the service uses less than half of it (the
 * traffic, not the service, is the bound then).
 */
export function gradient2(tolerance: number, smoothing = 0.2): LimitAlgorithm {
  return {
    next(limit, { meanMs, baselineMs, peakInflight, overloaded }) {
      const gradient = overloaded ? 0.5 : Math.max(0.5, Math.min(1, (tolerance * baselineMs) / meanMs))
      let target = limit * gradient + Math.min(4, Math.max(1, Math.sqrt(limit) / 2))
      if (peakInflight < limit / 2) target = Math.min(target, limit)
      return limit * (1 - smoothing) + target * smoothing
    },
  }
}

/** Additive increase, multiplicative decrease: +1 per interval while latency is within tolerance, ×0.9 otherwise. */
export function aimd(tolerance: number, backoff = 0.9): LimitAlgorithm {
  return {
    next(limit, { meanMs, baselineMs, peakInflight, overloaded }) {
      if (overloaded || meanMs > tolerance * baselineMs) return limit * backoff
      return peakInflight >= limit / 2 ? limit + 1 : limit
    },
  }
}

/**
 * Vegas (TCP Vegas, as Netflix's VegasLimit): the requests queued in the service are estimated as
 * limit × (1 − baseline / latency); the limit grows while that queue is short (below 3·log10 limit) and
 * shrinks once it is long (above 6·log10 limit).
 */
export function vegas(): LimitAlgorithm {
  return {
    next(limit, { meanMs, baselineMs, peakInflight, overloaded }) {
      const log = Math.max(1, Math.log10(limit))
      if (overloaded) return limit - log
      const queued = limit * (1 - baselineMs / Math.max(meanMs, baselineMs))
      if (queued > 6 * log) return limit - log
      if (queued < 3 * log && peakInflight >= limit / 2) return limit + log
      return limit
    },
  }
}
