import type { AlgorithmName, Decision, DecisionSource, LeaseGrant, LeaseRequest, LimitSpec, StoreCall } from '../types'
import type { Slice } from './lease-slice'
import type { MemoryTwin, Verdict } from './protocol'
import type { Windows } from './windows'

/**
 * An algorithm's Lua, for a store that runs scripts (RedisStore, through scripts.ts). Each algorithm's file
 * builds it in a function of its own, which nothing on the memory store's path calls: a bundle of an app on
 * the memory store (a Worker, an edge function) then carries none of it.
 */
export interface AlgorithmScripts {
  /** The admit, as the calling convention in protocol.ts. */
  readonly admit: string
  /** The refund: the same KEYS (or `refundKeys`) and ARGV as the admit it undoes. */
  readonly refund: string
  /**
   * The refunds' batch, when the algorithm has one of its own (refundBatchScript in correction-batch.ts): a
   * refund by call id, which takes per call only its limits' keys and the arguments [cost, id].
   */
  readonly refundBatch?: string
  /** The settle: see "Settle" in protocol.ts. */
  readonly settle: string
}

/**
 * What one counting algorithm is, in one file each (fixed-window.ts, sliding-window.ts, gcra.ts,
 * sliding-log.ts, concurrency.ts): see protocol.ts for the calling convention its scripts and memory twin share.
 */
export interface Algorithm {
  readonly name: AlgorithmName
  /** Takes the `burst` option (the bucket size); the others count up to `max`. */
  readonly burst: boolean
  /**
   * Its refund removes what the admit recorded under the call's id, so the call cannot be rebuilt from
   * the decision, which carries no id: the limiter keeps the call of every decision it admits.
   */
  readonly refundsByCallId: boolean
  /**
   * Its units are held until released (the request ends), not counted in a window: the limiter
   * releases each admitted request when its response ends, and the window is a unit's longest hold.
   */
  readonly releases?: boolean
  /** Refuses, by name, the options that mean nothing for it (the `algorithm` option's parse). */
  checkOptions?(o: Record<string, unknown>): void
  /**
   * A single limit of it is counted by the store's `increment` when the store has one (Store.increment:
   * INCRBY and PEXPIRE in a transaction, the store's numbers being the count it returns).
   */
  readonly increments?: boolean
  /** Appends limit `i`'s store keys, in the order its scripts take them. */
  keys(call: StoreCall, i: number, out: string[]): void
  /**
   * Appends limit `i`'s keys that `forget` (a `reset`) deletes, when they are more than `keys`: the window
   * algorithms' earlier windows, which outlive their use by the TTL margin, so a reset leaves nothing.
   */
  forgetKeys?(call: StoreCall, i: number, out: string[]): void
  /**
   * Turns the numbers of its admit script's reply into the store's numbers (`verdict`'s), in place, where
   * the script sends them in another form (GCRA's TATs, as integers relative to the call's time).
   */
  fromScript?(call: StoreCall, values: number[]): void
  /** Appends limit `i`'s keys of a refund, when they are not `keys` (the sliding window's: its window's and the next). */
  refundKeys?(call: StoreCall, i: number, out: string[]): void
  /** Appends limit `i`'s keys of a settle, in the order its settle script takes them. */
  settleKeys(call: StoreCall, i: number, out: string[]): void
  /** The memory twin, created once per MemoryStore; the window algorithms share `windows`. */
  memory(windows: Windows): MemoryTwin
  /**
   * The store's two numbers `a`, `b` for one limit, turned into a verdict (written into `out`, so the
   * hot path allocates nothing). `admitted` is the store's answer for the whole call.
   */
  verdict(out: Verdict, limit: LimitSpec, a: number, b: number, cost: number, now: number, admitted: boolean): void
  /** Appends the two numbers that make `verdict` report a full (allow) or an exhausted (deny) quota. */
  unavailable(limit: LimitSpec, now: number, allow: boolean, values: number[]): void
}

/**
 * What leasing (the `lease` option, limiter/fast-path/leases.ts) needs to know of an algorithm: how its
 * units lapse, what a grant means for a slice, and its decisions from a slice, made by the algorithm's
 * own verdict (decision.ts) so a leased decision reads as the store's would. An algorithm that leases
 * declares one (LEASE_MODELS in options/lease-option.ts, registered with the leasing feature); the lease path itself never
 * asks which algorithm it runs.
 */
export interface LeaseModel {
  /**
   * Units the fallback admits while the store is away are counted off the book and added to the store's
   * count at the next grant, the fallback's count starting from the share this process may take (the
   * fixed window, whose count is per window). Without, the fallback decides alone.
   */
  readonly offBook: boolean
  /** Moves the slice to the window containing `now`, if its units belong to a window (its last window's lapse). */
  turn(s: Slice, now: number, limit: LimitSpec): void
  /** A request stamped `now` waited for a grant until `later`: whether it is decided again, at `later`. */
  outlived(s: Slice, now: number, later: number, windowMs: number): boolean
  /** Sets aside units that stand for time already past, to give back at the next grant. */
  lapse(s: Slice, now: number): void
  /** Whether the next window's slice is asked for now (rather than one of this window, which would lapse). */
  asksAhead(s: Slice, windowMs: number, now: number): boolean
  /** Before a grant is asked for: forgets what was held under a marker that may have expired. */
  beforeGrant(s: Slice, now: number): void
  /** The units this process's slice adds to (or takes back from) the store's count at the next grant. */
  adjust(s: Slice): number
  /** Once a grant carried `adjust`: those units are in the store's count now. */
  adjusted(s: Slice, adjust: number): void
  /** Whether a grant applies to the slice (a late grant for a window the slice has left lapses). */
  accepts(s: Slice, request: LeaseRequest, grant: LeaseGrant, windowMs: number): boolean
  /** After a grant was taken in: when its units lapse, when the process stops being a lessee. */
  took(s: Slice, grant: LeaseGrant, limit: LimitSpec, now: number): void
  /** Until when nothing is granted: after the store lost the key (`grant` undefined), or an empty grant. */
  emptyUntil(s: Slice, now: number, windowMs: number, grant?: LeaseGrant): number
  /** Whether this process still holds a lease on the key at `now` (it has units to give back). */
  lessee(s: Slice, now: number, windowMs: number): boolean
  /** Units to give back when the lease ends. */
  unspent(s: Slice): number
  /**
   * The decision of a request admitted from the slice, `remaining` units left in this process's view,
   * by the algorithm's own verdict (`algorithm` is the one that declares this model).
   */
  admitted(algorithm: Algorithm, limit: LimitSpec, remaining: number, cost: number, now: number, key: string): Decision
  /** The decision of a request the slice cannot admit, `waitMs` until a unit is known to fit. */
  refused(algorithm: Algorithm, limit: LimitSpec, cost: number, now: number, key: string, source: DecisionSource, waitMs: number): Decision
}
