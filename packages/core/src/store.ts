/** A value now, or later: the memory store answers synchronously so the hot path allocates no promise. */
export type MaybePromise<T> = T | Promise<T>

/**
 * What a limiter needs from a store, for the fixed-window algorithm.
 *
 * `key` is the client's base key (`<prefix>{<client key>}`); the store appends the window index,
 * `floor(now / windowMs)`, so windows are aligned to the clock and a store never needs to know the
 * limit. Counting is atomic: `increment` returns the count *after* adding `cost`, and the limiter
 * decides from that number alone (never read-then-write).
 */
export interface Store {
  /** True when counts live in this process: no deadline, no failure policy, no over-limit cache. */
  readonly local: boolean
  /** Adds `cost` to the key's count in the window containing `now`; resolves to the new count. */
  increment(key: string, cost: number, windowMs: number, now: number): MaybePromise<number>
  /** The key's count in the window containing `now`, without changing it. */
  get(key: string, windowMs: number, now: number): MaybePromise<number>
  /** Forgets the key's count in the window containing `now`. */
  reset(key: string, windowMs: number, now: number): MaybePromise<void>
}

/** Index of the fixed window containing `now`. Shared by every store so they agree on edges. */
export function windowIndex(now: number, windowMs: number): number {
  return Math.floor(now / windowMs)
}
