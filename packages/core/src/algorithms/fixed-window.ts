import { stem, windowIndex } from '../keys'
import type { LimitSpec, StoreCall } from '../types'
import type { Algorithm, AlgorithmScripts } from './algorithm'
import { batchScript, LUA_REPLAYED, luaHashWrites } from './batch-script'
import { counterRefundScript, counterSettleKeys, counterSettleScript } from './counter-scripts'
import { type MemoryTwin, TTL_MARGIN_MS, type Verdict } from './protocol'
import { counterUnavailable, countIn, type Windows, windowTwin } from './windows'

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
 * - the script path, several limits at once (fixedWindowAdmitScript): all-or-nothing, so a request that
 *   one limit refuses is counted by none, refusing limit included.
 * Either way the decision is `count ≤ max` on the count the store returned. `peek` reports the same for
 * both (units used, at most max), see limiter/counting.ts.
 */

/**
 * One window key of a fast-path transaction, in parts: the Redis key is `<stem>:<index>`, built only by a
 * transport that needs it as one string; `total` is the merged cost of the requests on it.
 */
export interface WindowWrite {
  readonly stem: string
  readonly index: number
  readonly total: number
  readonly ttlMs: number
}

/** The Redis key of a WindowWrite. */
export function windowKey(write: WindowWrite): string {
  return `${write.stem}:${write.index}`
}

/** The commands of the fast path, by the names ioredis's transaction methods carry (RedisTransactionLike). */
export type FixedWindowCommand = 'incrby' | 'pexpire'

/**
 * The fast path's commands for one window key, inside the caller's MULTI: `INCRBY key cost; PEXPIRE key
 * ttl`, the classic pattern. This is the one description of the transaction: every transport (the client's
 * `multi()`, the writer onto its connection, the store's own connection, node-redis) sends what `emit`
 * hears here, in order, with `key` in whatever form it writes keys.
 *
 * PEXPIRE runs in the same transaction, so no key ever exists without a TTL, even if the client dies
 * mid-request; re-arming the TTL on every hit cannot stretch the window, which is in the key's name. A
 * refusal cannot split the two either: Redis checks ACL and maxmemory as it queues each command, and a
 * refused INCRBY or PEXPIRE (NOPERM, OOM) makes EXEC abort the whole transaction (EXECABORT) before
 * anything is written (checked against Redis 7 with an ACL user lacking PEXPIRE:
 * test/faults/redis-acl.test.ts). Arguments go as strings, which every transport writes as they are.
 */
export function fixedWindowCommands<K>(
  key: K,
  cost: number,
  ttlMs: number,
  emit: (command: FixedWindowCommand, key: K, argument: string) => void,
): void {
  emit('incrby', key, String(cost))
  emit('pexpire', key, String(ttlMs))
}

/** Replies per key of fixedWindowCommands. */
export const FIXED_WINDOW_REPLIES = 2

/**
 * The count of one key from EXEC's replies (`replies[at]`, `replies[at + 1]`, as fixedWindowCommands sent
 * them): INCRBY's count, at least the `cost` it just added; PEXPIRE's 1 (the key exists, INCRBY made
 * it). An error reply is that key's own failure (WRONGTYPE on a key of the same name), returned as it
 * is. Anything else is not an answer to these commands (a reply stream out of step, a broken proxy):
 * undefined, a protocol error, never a count.
 */
export function fixedWindowCount(replies: readonly unknown[], at: number, cost: number): number | Error | undefined {
  const count = replies[at]
  const expiry = replies[at + 1]
  if (count instanceof Error) return count
  if (expiry instanceof Error) return expiry
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < cost || expiry !== 1) return undefined
  return count
}

/**
 * The part of an ioredis transaction (`client.multi()`) the store uses: a method per FixedWindowCommand,
 * and ZREM for the removals by call id of a turn's releases (removals.ts), where the client has it.
 */
export interface RedisTransactionLike {
  incrby(key: string, increment: string): RedisTransactionLike
  pexpire(key: string, milliseconds: string): RedisTransactionLike
  zrem?(key: string, ...members: string[]): RedisTransactionLike
  exec(): Promise<Array<[Error | null, unknown]> | null>
}

/** Queues fixedWindowCommands for `write` on an ioredis-shaped transaction (`client.multi()`). */
export function addFixedWindow(tx: RedisTransactionLike, write: WindowWrite): void {
  fixedWindowCommands(windowKey(write), write.total, write.ttlMs, (command, key, argument) => tx[command](key, argument))
}

/** TTL of a window key written at `now`: the rest of the window, plus the margin. */
export function fixedWindowTtl(windowMs: number, now: number): number {
  return (windowIndex(now, windowMs) + 1) * windowMs - now + TTL_MARGIN_MS
}

/**
 * Several limits (the script path), one call of a batch (batchScript): each limit's key is a hash, its
 * count in field `n` beside the records of exactly once (protocol.ts). If all fit, each count after is
 * the count read plus the cost (the script is atomic), written with HSET (luaHashWrites). A key of the
 * transaction path (one limit's, which `peek` reads here) is a plain counter, read and counted as one.
 */
function fixedWindowAdmitScript(): string {
  return batchScript(
    1,
    `for i = 1, n do
    local w = lims[lim + 3 * i - 1]
    local v
    recs[i], plains[i], v = hread(KEYS[k + i], 'n')
    local c = tonumber(v or '0')
    fresh[i] = not v
    ttls[i] = (math.floor(now / w) + 1) * w - now + ${TTL_MARGIN_MS}
    writes[2 * i - 1], writes[2 * i] = 'n', c + cost
    out[2 * i - 1] = c
    out[2 * i] = c
    if c + cost > lims[lim + 3 * i - 2] then code = 0 end
  end
  ${LUA_REPLAYED}
  if code == 1 then
    for i = 1, n do out[2 * i] = out[2 * i - 1] + cost end
  end
  ${luaHashWrites('fresh[i]', 1, 'count')}`,
  )
}

/** The fixed window's Lua (scripts.ts): built only when a RedisStore asks, so an app on the memory store carries none. */
export function fixedWindowScripts(): AlgorithmScripts {
  return { admit: fixedWindowAdmitScript(), settle: counterSettleScript(1), refund: counterRefundScript(1) }
}

function memory(windows: Windows): MemoryTwin {
  return windowTwin(
    windows,
    {
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
    },
    false,
  )
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
  refundsByCallId: false,
  increments: true,
  keys(call: StoreCall, i: number, out: string[]) {
    out.push(`${stem(call, i)}:${windowIndex(call.now, call.limits[i]!.windowMs)}`)
  },
  forgetKeys(call: StoreCall, i: number, out: string[]) {
    const w = windowIndex(call.now, call.limits[i]!.windowMs)
    // With a window as short as the TTL margin, the one before the previous lives on too.
    out.push(`${stem(call, i)}:${w}`, `${stem(call, i)}:${w - 1}`, `${stem(call, i)}:${w - 2}`)
  },
  settleKeys: counterSettleKeys,
  memory,
  verdict,
  unavailable: counterUnavailable,
}
