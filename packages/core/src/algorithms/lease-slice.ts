import { windowIndex } from '../keys'
import type { LimitSpec } from '../types'

// One key's slice of the `lease` option (limiter/fast-path/leases.ts): its state, when its next grant is asked for, and
// the decisions made from it.

/**
 * How long a process trusts a refusal it keeps (the over-limit cache, a lease's empty slice) before it
 * asks the store again. Within one window a count only grows, except that `reset` (or a refund) in
 * another process takes it back, which this process cannot hear of: asking again at most this often
 * is how such a reset reaches it, within a second as documented. A client refused for a whole window
 * costs the store one call per second instead of none, and nothing per request.
 */
export const REFUSAL_TRUST_MS = 1000

/**
 * The next slice is asked for once this fraction of the current one is left, or once what is left lasts
 * fewer than LEAD_ROUND_TRIPS grant round trips at the recent rate, whichever comes first (but never
 * before half of it is spent): a steady key never waits, and a burst rarely does, without asking again
 * long before the slice runs out (each grant is a few commands in Redis, however many units it carries).
 */
const PREFETCH_AT = 0.1
const LEAD_ROUND_TRIPS = 8

/** One key's lease in this process. */
export interface Slice {
  readonly clientKey: string
  readonly stem: string
  /** The limit the slice was last leased under (for giving it back). */
  limit: LimitSpec
  /** Fixed window: the window index the slice belongs to. */
  w: number
  /** Units held, unspent. */
  left: number
  /** Units granted under the current marker (the script's `held`), 0 when the process is no lessee. */
  granted: number
  /** GCRA: when the marker in Redis may have expired (the process is then no lessee). */
  markerUntil: number
  /** What Redis had left after the last grant, and the processes leasing the key then. */
  remote: number
  lessees: number
  /** The last grant's size: the next is asked for once PREFETCH_AT of it is left. */
  size: number
  /** The grants' round trip, ms, smoothed (see PREFETCH_AT). */
  rtt: number
  /** Fixed window: a grant for the next window, asked for just before it starts (see aheadOf). */
  ahead: { readonly w: number; readonly granted: number; readonly remote: number; readonly lessees: number } | undefined
  /** Nothing more to grant until then (fixed window: the window's end; GCRA: until a unit fits). */
  emptyUntil: number
  /** When an empty slice is asked about again, though emptyUntil has not come: see isEmpty. */
  emptyAskAt: number
  /** Redis lost the key while this process held a slice: refused until then. */
  spentUntil: number
  /** GCRA: when the slice lapses (the time its units stand for), and units of a lapsed slice to give back. */
  lapseAt: number
  back: number
  /** Fixed window: units the fallback admitted in this window, added to Redis's count at the next grant. */
  offBook: number
  /** The fallback's count was set for this window (see Leases.fallBack). */
  seeded: number
  inflight: Promise<void> | undefined
  /** Units of requests waiting for the grant in flight. */
  waiting: number
  /** Units per ms, smoothed; units since `mark`. */
  rate: number
  recent: number
  mark: number
  lastUse: number
}

/** A slice for `clientKey` under `limit`, empty, in the window containing `now`. */
export function newSlice(clientKey: string, stem: string, limit: LimitSpec, now: number): Slice {
  return {
    clientKey,
    stem,
    limit,
    w: windowIndex(now, limit.windowMs),
    left: 0,
    granted: 0,
    markerUntil: 0,
    remote: limit.max,
    lessees: 1,
    size: 0,
    rtt: 0,
    ahead: undefined,
    emptyUntil: 0,
    emptyAskAt: 0,
    spentUntil: 0,
    lapseAt: 0,
    back: 0,
    offBook: 0,
    seeded: -1,
    inflight: undefined,
    waiting: 0,
    rate: 0,
    recent: 0,
    mark: now,
    lastUse: now,
  }
}

/** Fixed window: moves the slice to window `w`, with the grant asked ahead for it if there is one; the last window's units lapse. */
export function turn(s: Slice, w: number, max: number): void {
  if (w === s.w) return
  const a = s.ahead?.w === w ? s.ahead : undefined
  s.ahead = undefined
  s.w = w
  s.offBook = 0
  s.left = a?.granted ?? 0
  s.granted = a?.granted ?? 0
  s.size = a?.granted ?? 0
  s.remote = a?.remote ?? max
  if (a !== undefined) {
    s.lessees = a.lessees
    if (a.granted === 0) {
      s.emptyUntil = (w + 1) * s.limit.windowMs
      s.emptyAskAt = w * s.limit.windowMs + REFUSAL_TRUST_MS
    }
  }
}

/**
 * Whether the slice is known to have nothing more to grant at `now`: the store said so, and said it
 * less than REFUSAL_TRUST_MS ago (a `reset` in another process gives the quota back, and this process
 * hears of it only by asking).
 */
export function isEmpty(s: Slice, now: number): boolean {
  return now < s.emptyUntil && now < s.emptyAskAt
}

/** Units left in the slice at which the next is asked for (PREFETCH_AT). */
export function prefetchAt(s: Slice): number {
  return Math.min(s.size * 0.5, Math.max(s.size * PREFETCH_AT, s.rate * s.rtt * LEAD_ROUND_TRIPS))
}

/**
 * How long before its window ends the next window's slice is asked for: a few grant round trips, at
 * least 20 ms, at most a quarter of the window. A key busy at the end of a window is then decided from
 * a slice from the new window's first request, with no wait.
 */
export function aheadOf(s: Slice, windowMs: number): number {
  return Math.min(windowMs / 4, Math.max(20, s.rtt * LEAD_ROUND_TRIPS))
}
