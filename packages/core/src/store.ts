import type { ConsumeCall, ConsumeResult } from './algorithms'

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
  /**
   * One atomic check-and-update for every algorithm and for several limits at once: either every
   * limit admits the request and all count it, or none does (see algorithms.ts for the protocol).
   */
  consume(call: ConsumeCall): MaybePromise<ConsumeResult>
  /** Undoes an admitted call (a refund), only within the call's own windows and never below zero. */
  refund(call: ConsumeCall): MaybePromise<void>
  /** Deletes everything the call's client has for the call's limits. */
  forget(call: ConsumeCall): MaybePromise<void>
}

/** Index of the fixed window containing `now`. Shared by every store so they agree on edges. */
export function windowIndex(now: number, windowMs: number): number {
  return Math.floor(now / windowMs)
}
