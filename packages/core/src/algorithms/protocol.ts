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
 *   KEYS  = the keys of each limit, in limit order, as `keys` appends them, then the call's record
 *           (callRecordKey), last
 *   ARGV  = cost, now (epoch ms from the limiter's clock), call id, then max, windowMs, burst per limit
 *   Reply = { call id, allowed (1/0), then two numbers per limit }, whose meaning each algorithm
 *           documents; a refund replies with the call id alone
 * Each admit script first checks every limit, then updates all of them or none: a request refused by
 * one limit uses up no other. A script runs atomically in Redis: one round trip and no race. Every key
 * a script writes gets a TTL in the same script. A refund script takes the same KEYS and ARGV as the
 * admit it undoes, its own record key aside.
 *
 * A script may run twice for one call: a client that loses its connection after Redis ran a command
 * but before the reply came back sends it again once reconnected (ioredis's
 * autoResendUnfulfilledCommands). So each script records its call (LUA_RECORD) and, run again with the
 * same id, counts nothing and returns the first run's reply. The reply carries the call id so the store
 * can tell a reply of another call (a reply stream out of step) from its own.
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
 * How long a script's record of its call lives. A resent command arrives once the client has
 * reconnected, normally within a few of its retry delays (ioredis waits at most 2 s between attempts by
 * default); a resend later than this counts again, as it did before calls were recorded. Longer would
 * cover longer outages, at the price of one small key per call held that much longer on a busy server.
 */
export const CALL_RECORD_TTL_MS = 10_000

/**
 * The key recording that `op` ran for `call`, the last of the script's KEYS: under the call's store key,
 * so it has the prefix (a `~tg:*` ACL user may write it) and the client's hash tag (one Cluster slot with
 * the call's other keys). A call id holds a ":", which no limit key's last part does.
 */
export function callRecordKey(call: StoreCall, op: 'admit' | 'refund' | 'settle'): string {
  return `${call.storeKey}:${op}:${call.id}`
}

/** The first lines of every admit script; `n` is the number of limit keys (the record is KEYS[n + 1]). */
export const LUA_HEAD = `
local cost = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local n = #KEYS - 1
local out = {0}
local ok = 1
`

/**
 * Between an admit script's reads and its writes, once `out` holds the whole reply: records it under
 * the call's key (SET ... NX, with its TTL in the same command) and, if a run with this call id recorded
 * one already, returns that run's reply instead of counting again. One command per call; a second GET
 * only when run again. A read (cost 0) counts nothing and records nothing. The record is the first write,
 * so a Redis out of memory refuses it before anything is counted.
 */
export const LUA_RECORD = `
out[1] = ok
if cost > 0 and not redis.call('SET', KEYS[n + 1], table.concat(out, ' '), 'PX', ${CALL_RECORD_TTL_MS}, 'NX') then
  local first = {ARGV[3]}
  for v in string.gmatch(redis.call('GET', KEYS[n + 1]), '%S+') do first[#first + 1] = v end
  first[2] = tonumber(first[2])
  return first
end`

/** The last lines of every admit script: the reply, the call id first. */
export const LUA_REPLY = `
table.insert(out, 1, ARGV[3])
return out`

/**
 * The first lines of a refund script: a refund already run for this call id (its record exists) returns
 * at once, so a refund sent again does not refund twice.
 */
export const LUA_REFUND_HEAD = `
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
export const LUA_SETTLE_HEAD = `
local cost = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local n = #KEYS - 1
local actual = tonumber(ARGV[#ARGV - 1])
local settled = tonumber(ARGV[#ARGV])
local delta = actual - cost
if delta == 0 or not redis.call('SET', KEYS[n + 1], '1', 'PX', ${CALL_RECORD_TTL_MS}, 'NX') then return ARGV[3] end
`
