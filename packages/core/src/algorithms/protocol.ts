import { stem } from '../keys'
import type { StoreCall } from '../types'

/*
 * What the algorithms share. Each algorithm, in one file (fixed-window.ts, sliding-window.ts, gcra.ts,
 * sliding-log.ts), holds its store keys, its memory twin, its Lua twin with the same arithmetic, its
 * refund, the mapping from the store's numbers to a verdict, and the numbers it reports when the store
 * is unavailable (the Algorithm interface, algorithm.ts). Adding an algorithm means adding one file and
 * one line in index.ts.
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
  /**
   * Takes limit `i`'s state from another store's answer (`a`, `b`, `admitted` as that store returned
   * them), keeping whichever is further along: the fallback continues the count of the store it
   * stands in for. May be conservative (count more than the store did), never less.
   */
  seed(call: StoreCall, i: number, a: number, b: number, admitted: boolean): void
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

/** The last lines of every admit script: the reply. */
export const LUA_REPLY = `
out[1] = ok
return out`

/** The first lines of every admit script. */
export const LUA_HEAD = `
local cost = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local out = {0}
local ok = 1
`

/** `keys` of an algorithm with one key per limit, `<stem>:<suffix>`, whatever the window. */
export function oneKeyPerLimit(suffix: string): (call: StoreCall, i: number, out: string[]) => void {
  return (call, i, out) => void out.push(`${stem(call, i)}:${suffix}`)
}
