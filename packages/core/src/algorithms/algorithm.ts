import type { AlgorithmName, LimitSpec, StoreCall } from '../types'
import type { Windows } from './windows'

/**
 * What one counting algorithm is, in one file each (fixed-window.ts, sliding-window.ts, gcra.ts,
 * sliding-log.ts): its store keys, its memory twin, its Lua twin with the same arithmetic, its refund,
 * the mapping from the store's numbers to a verdict, and the numbers it reports when the store is
 * unavailable. Adding an algorithm means adding one file and one line in index.ts.
 *
 * The store protocol (types.ts, StoreCall/StoreResult) is shared by every algorithm:
 *   KEYS  = the keys of each limit, in limit order, as `keys` appends them
 *   ARGV  = cost, now (epoch ms from the limiter's clock), call id, then max, windowMs, burst per limit
 *   Reply = { allowed (1/0), then two numbers per limit }, whose meaning each algorithm documents
 * Each admit script first checks every limit, then updates all of them or none: a request refused by
 * one limit uses up no other. A script runs atomically in Redis: one round trip and no race. Every key
 * a script writes gets a TTL in the same script. A refund script takes the same KEYS and ARGV as the
 * admit it undoes.
 */
export interface Algorithm {
  readonly name: AlgorithmName
  /** Takes the `burst` option (the bucket size); the others count up to `max`. */
  readonly burst: boolean
  /** Appends limit `i`'s store keys, in the order its scripts take them. */
  keys(call: StoreCall, i: number, out: string[]): void
  /** Lua of `admit`, as the calling convention above. */
  readonly admitScript: string
  /** Lua of `refund`: the same KEYS and ARGV as the admit it undoes. */
  readonly refundScript: string
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

/** One limit's verdict, before it becomes a Decision (decision.ts). */
export interface Verdict {
  /** This limit alone would admit the request. */
  fits: boolean
  count: number
  remaining: number
  resetAt: number
  retryAfterMs: number
}

/** An algorithm's state in a MemoryStore: the memory twin of its Lua. */
export interface MemoryTwin {
  /** Reads limit `i` of the call, appends its two numbers to `values`; true when it fits. Changes nothing. */
  read(call: StoreCall, i: number, values: number[]): boolean
  /** Counts limit `i` (called for every limit, once all fit), fixing up its numbers in `values` if need be. */
  write(call: StoreCall, i: number, values: number[]): void
  refund(call: StoreCall, i: number): void
  forget(call: StoreCall, i: number): void
  /** Drops what has expired by `now`. */
  prune(now: number): void
  /** Client entries held. */
  readonly size: number
}

/**
 * How far past its useful life a key lives. Processes decide the window from their own clocks; the
 * margin keeps a key alive for a process whose clock lags by up to this much, while a key still never
 * outlives its use by more than this.
 */
export const TTL_MARGIN_MS = 1000

/** ARGV of the scripts: cost, now, id, then max, windowMs, burst per limit. */
export function argsOf(call: StoreCall): Array<string | number> {
  const args: Array<string | number> = [call.cost, call.now, call.id]
  for (const l of call.limits) args.push(l.max, l.windowMs, l.burst)
  return args
}

/** The first lines of every admit script. */
export const LUA_HEAD = `
local cost = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local out = {0}
local ok = 1
`
