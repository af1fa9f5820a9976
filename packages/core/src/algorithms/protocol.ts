import { stem } from '../keys'
import type { StoreCall } from '../types'

/*
 * What the algorithms share. Each algorithm, in one file (fixed-window.ts, sliding-window.ts, gcra.ts,
 * sliding-log.ts, concurrency.ts), holds its store keys, its memory twin, its Lua twin with the same
 * arithmetic, its refund, the mapping from the store's numbers to a verdict, and the numbers it reports
 * when the store is unavailable (the Algorithm interface, algorithm.ts). Its Lua is built by a function
 * of its own (the sliding log's and concurrency's, which share theirs, in log-scripts.ts), which only
 * scripts.ts calls, for RedisStore: an app on the memory store carries none. Adding
 * an algorithm means adding one file and one line each in index.ts and scripts.ts.
 *
 * The admit protocol (types.ts, StoreCall/StoreResult) is shared by every algorithm. One script call
 * decides a batch of calls, in order (the store sends one per event-loop turn, batchScript below):
 *   KEYS  = for each call, the keys of each of its limits, in limit order, as `keys` appends them
 *   ARGV  = the store's instance id, the batch's sequence number, the number of calls, then the
 *           limits and per call its id, cost, now (epoch ms from the limiter's clock) and limits, as
 *           batchArgs lays them out
 *   Reply = { the first call's id, then per call: its code, two numbers per limit }, the code 1
 *           (admitted), 0 (refused), 2 (admitted by an earlier run of this batch), 3 (the first call an
 *           earlier run of this batch admitted), 4 (run by an earlier run, outcome unknown: see "Exactly
 *           once") or -1 (a key of this call alone failed, WRONGTYPE say: its message in place of the first
 *           number); the numbers' meaning each algorithm documents
 * Each call's admit first checks every limit, then updates all of them or none: a request refused by
 * one limit uses up no other. A script runs atomically in Redis: one round trip and no race. Every key a
 * script writes gets a TTL in the same script. A refund script takes one call, with argsOf's ARGV.
 *
 * Exactly once. A client that loses its connection after Redis ran a script but before the reply came
 * back sends it again once reconnected (ioredis's autoResendUnfulfilledCommands), and a batch that ran
 * must not count twice. The protection lives in the state it protects, at no key and no command of its
 * own: the first call a batch admits writes, into its first key, in a field named by the store's instance
 * id, the batch's sequence as the last of that store to record there and a bitmask of the 19 before it
 * (LUA_SEEN); every call reads that field with its count. A batch runs whole or not at all, so when a
 * run finds its own bit on a call's first key (set by an earlier run, not by this one), that call was the
 * one the earlier run admitted first (code 3, LUA_REPLAYED): alone on its key in the batch, it is answered
 * admitted, with the numbers as read now (its own units included); beside another call of the batch on that
 * key, which of them was admitted cannot be told, and it fails as a call whose reply did not come
 * (onStoreError decides). The calls after it ran in the earlier run too and are not run again (code 4: they
 * fail the same way). The calls before it counted nothing in the earlier run (it admitted none of them) and
 * are decided again. A store sends its
 * batches in sequence order on one connection per node, so a resend comes before anything newer on the
 * same key; the mask only needs to absorb the little reordering a NOSCRIPT retry or a Cluster redirect
 * makes, and a bit older than the mask reads as "not seen" (counted, as before calls were recorded). The
 * sorted-set algorithms name their entries by call id, so theirs is the entry itself (LUA_LOGGED).
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
  /**
   * Moves limit `i`'s count of the admitted `call` from `call.cost` to `actual`, in the call's own
   * window, if that window has not ended by `now` (the settle's time) and the twin has counted no later
   * one (see "Settle" below).
   */
  settle(call: StoreCall, i: number, actual: number, now: number): void
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

/**
 * How long a refund's or a settle's record of its call lives (`<storeKey>:<op>:<id>`). Those two run
 * once per admitted call at most, and only with the options that use them (skip*Requests, actualCost),
 * so they keep a small key of their own rather than a field in the counter: a resent command arrives
 * once the client has reconnected, normally within a few of its retry delays (ioredis waits at most 2 s
 * between attempts by default); a resend later than this counts again.
 */
export const CALL_RECORD_TTL_MS = 10_000

/** The key recording that a refund or a settle ran for `call`: under the call's store key (the prefix, the client's hash tag). */
export function callRecordKey(call: StoreCall, op: 'refund' | 'settle'): string {
  return `${call.storeKey}:${op}:${call.id}`
}

/**
 * The first lines of a refund script: a refund already run for this call id (its record exists) returns
 * at once, so a refund sent again does not refund twice.
 */
export const LUA_REFUND_HEAD = (): string => `
local cost = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local n = #KEYS - 1
if not redis.call('SET', KEYS[n + 1], '1', 'PX', ${CALL_RECORD_TTL_MS}, 'NX') then return ARGV[3] end
`

/** `keys` of an algorithm with one key per limit, `<stem>:<suffix>`, whatever the window. */
export function oneKeyPerLimit(suffix: string): (call: StoreCall, i: number, out: string[]) => void {
  return (call, i, out) => void out.push(`${stem(call, i)}:${suffix}`)
}

/*
 * Settle: an admitted call's count moved from its estimate (`call.cost`) to its actual cost, once the
 * actual cost is known (after the response). The store's optional `settle(call, actual, now)`.
 *   KEYS  = the keys of each limit as `settleKeys` appends them, then the call's settle record, last
 *   ARGV  = the call's ARGV (argsOf: cost = the estimate, now = the call's time, id), then actual, and
 *           the settle's own time (the limiter's clock)
 *   Reply = the call id
 * Each limit on its own: its count moves only if the settle's time still lies in the window of the
 * call's time (for GCRA and the sliding log: within one window length of the call, after which the
 * call no longer weighs), and, for the window algorithms, only if no later window of the client's has
 * a count yet: a sliding window's previous window weighs in the next one, so a settle that arrived
 * after another process (another clock) opened the next window would change what that window reads.
 * Both checks run inside the script, atomically with the change. Lower, the difference is taken back
 * (never below zero); higher, it is added even past the limit, so later calls of that window are
 * refused. Every key written keeps or gets a TTL in the same script, and the settle record makes a
 * settle sent twice count once.
 */

/** The first lines of a settle script: `delta` is what moves; a settle already run for this call id returns at once. */
export const LUA_SETTLE_HEAD = (): string => `
local cost = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local n = #KEYS - 1
local actual = tonumber(ARGV[#ARGV - 1])
local settled = tonumber(ARGV[#ARGV])
local delta = actual - cost
if delta == 0 or not redis.call('SET', KEYS[n + 1], '1', 'PX', ${CALL_RECORD_TTL_MS}, 'NX') then return ARGV[3] end
`
