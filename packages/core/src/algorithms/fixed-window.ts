import { stem, windowIndex } from '../keys'
import type { LimitSpec, StoreCall } from '../types'
import type { Algorithm } from './algorithm'
import { LUA_HEAD, LUA_RECORD, LUA_REPLY, type MemoryTwin, TTL_MARGIN_MS, type Verdict } from './protocol'
import { counterRefundScript, counterUnavailable, counterWrites, countIn, type Windows, windowTwin } from './windows'

/*
 * Fixed window: one counter per client and window, `<stem>:<window index>`, the window aligned to the
 * clock. The store's numbers per limit: [count before, count after] (after = before when refused).
 *
 * Two ways to count, one decision (`verdict` below):
 * - the fast path, a single limit on a store with `increment`: `MULTI; INCRBY key cost; PEXPIRE key
 *   ttl; EXEC` (addFixedWindow), batched and merged per key in Redis. It counts refused requests
 *   too: the count INCRBY returns is the decision's only input, read and write in one atomic step, so
 *   a concurrent burst cannot slip past the limit the way GET-then-INCR lets it. That is the classic
 *   Redis pattern; it also makes "over the limit" permanent for the rest of the window, which is what
 *   lets the limiter answer a client already over it without a round trip (the over-limit cache).
 * - the script path, several limits at once (FIXED_WINDOW_SCRIPT): all-or-nothing, so a request that
 *   one limit refuses is counted by none, refusing limit included.
 * Either way the decision is `count ≤ max` on the count the store returned. `peek` reports the same for
 * both (units used, at most max), see limiter/counting.ts.
 */

/** The part of an ioredis transaction (`client.multi()`) the fast path uses. */
export interface RedisTransactionLike {
  incrby(key: string, increment: string): RedisTransactionLike
  pexpire(key: string, milliseconds: string): RedisTransactionLike
  exec(): Promise<Array<[Error | null, unknown]> | null>
  /**
   * Tollgate's own transactions (redis-direct.ts): addFixedWindow's two commands for the key
   * `<stem>:<index>`, given in parts.
   */
  window?(stem: string, index: number, cost: number, ttlMs: number): void
}

/**
 * The fast path's commands for one window key, inside the caller's MULTI: `INCRBY key cost; PEXPIRE key
 * ttl`, the classic pattern. PEXPIRE runs in the same transaction, so no key ever exists without a TTL,
 * even if the client dies mid-request; re-arming the TTL on every hit cannot stretch the window, which
 * is in the key's name. A refusal cannot split the two either (#12): Redis checks ACL and maxmemory as
 * it queues each command, and a refused INCRBY or PEXPIRE (NOPERM, OOM) makes EXEC abort the whole
 * transaction (EXECABORT) before anything is written (checked against Redis 7 with an ACL user lacking
 * PEXPIRE: test/faults/redis-acl.test.ts).
 */
export function addFixedWindow(tx: RedisTransactionLike, key: string, cost: number, ttlMs: number): void {
  // Arguments as strings: ioredis spends ~2 µs more per key converting numbers itself. The chained
  // calls, not multi([[...], ...]): no command arrays to build and slice, ~4% more decisions per
  // second in bench/store-bench.mjs.
  tx.incrby(key, String(cost)).pexpire(key, String(ttlMs))
}
/** Replies per key of addFixedWindow. */
export const FIXED_WINDOW_REPLIES = 2
/** Which of a key's FIXED_WINDOW_REPLIES replies is the count (INCRBY's), counted from 0. */
export const FIXED_WINDOW_COUNT_REPLY = 0

/** TTL of a window key written at `now`: the rest of the window, plus the margin. */
export function fixedWindowTtl(windowMs: number, now: number): number {
  return (windowIndex(now, windowMs) + 1) * windowMs - now + TTL_MARGIN_MS
}

/**
 * Several limits: GET each count; if all fit, the count after is the count read plus the cost (the
 * script is atomic), recorded with the reply (LUA_RECORD); then create each key with its TTL and INCRBY
 * each (counterWrites).
 */
const FIXED_WINDOW_SCRIPT = `${LUA_HEAD}
for i = 1, n do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  out[2 * i] = c
  out[2 * i + 1] = c
  if c + cost > tonumber(ARGV[3 * i + 1]) then ok = 0 end
end
if ok == 1 then
  for i = 1, n do out[2 * i + 1] = out[2 * i] + cost end
end
${LUA_RECORD}
${counterWrites(1, 1)}
${LUA_REPLY}`

function memory(windows: Windows): MemoryTwin {
  return windowTwin(windows, {
    read(call, i, values) {
      const { max, windowMs } = call.limits[i]!
      const group = windows.current(windowMs, call.now)
      const cur = countIn(group.counts, windows.held(group, stem(call, i)), group.index)
      values.push(cur, cur)
      return cur + call.cost <= max
    },
    write(call, i, values) {
      values[2 * i + 1] = windows.increment(stem(call, i), call.cost, call.limits[i]!.windowMs, call.now)
    },
    seed(call, i, a, b, admitted) {
      windows.seed(stem(call, i), call.limits[i]!.windowMs, call.now, admitted ? b : a)
    },
  })
}

/** The one fixed-window decision, for the fast path (a = count − cost, b = count) and the script path. */
function verdict(out: Verdict, limit: LimitSpec, a: number, b: number, cost: number, now: number, admitted: boolean): void {
  const { max, windowMs } = limit
  const windowEnd = (windowIndex(now, windowMs) + 1) * windowMs
  out.fits = a + cost <= max
  out.count = admitted ? b : a + cost
  out.remaining = Math.max(0, max - (admitted ? b : a))
  out.resetAt = windowEnd
  out.retryAfterMs = out.fits ? 0 : windowEnd - now
}

export const fixedWindow: Algorithm = {
  name: 'fixed-window',
  burst: false,
  keys(call: StoreCall, i: number, out: string[]) {
    out.push(`${stem(call, i)}:${windowIndex(call.now, call.limits[i]!.windowMs)}`)
  },
  admitScript: FIXED_WINDOW_SCRIPT,
  refundScript: counterRefundScript(1),
  memory,
  verdict,
  unavailable: counterUnavailable,
}
