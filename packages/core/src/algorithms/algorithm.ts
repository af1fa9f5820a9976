import type { AlgorithmName, LimitSpec, StoreCall } from '../types'
import type { MemoryTwin, Verdict } from './protocol'
import type { Windows } from './windows'

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
  /** Lua of `admit`, as the calling convention above. */
  readonly admitScript: string
  /** Appends limit `i`'s keys of a refund, when they are not `keys` (the sliding window's: its window's and the next). */
  refundKeys?(call: StoreCall, i: number, out: string[]): void
  /** Lua of `refund`: the same KEYS (or `refundKeys`) and ARGV as the admit it undoes. */
  readonly refundScript: string
  /** Appends limit `i`'s keys of a settle, in the order its settle script takes them. */
  settleKeys(call: StoreCall, i: number, out: string[]): void
  /** Lua of `settle`: see "Settle" in protocol.ts. */
  readonly settleScript: string
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
