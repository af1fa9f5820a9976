import { stem, windowIndex } from '../keys'
import type { LimitSpec, StoreCall } from '../types'
import type { Algorithm, AlgorithmScripts } from './algorithm'
import { batchScript, LUA_REPLAYED, luaHashWrites } from './batch-script'
import { counterRefundScript, counterSettleKeys, counterSettleScript } from './counter-scripts'
import { type MemoryTwin, TTL_MARGIN_MS, type Verdict } from './protocol'
import { counterUnavailable, countIn, type Windows, windowTwin } from './windows'

/*
 * Sliding-window counter (Cloudflare's estimate): the previous window's count weighted by how much of
 * it still overlaps the sliding window, plus the current count, must stay ≤ max. Compared in
 * integers: prev × (W − e) + cur × W ≤ max × W, where e is the time into the current window.
 * Keys per limit: `<stem>:<window index>` (current) and `<stem>:<window index − 1>` (previous); an admit
 * names only the current one (slidingWindowAdmitScript).
 * The store's numbers per limit: [previous window's count, current window's count before].
 */

/**
 * One call of a batch (batchScript). The current window's key is a hash (its count in field `n`, beside
 * the records of exactly once, protocol.ts) and lives until the end of the next window, where it is the
 * previous one; when it is made, the key of the window before the previous goes (DEL), so a client
 * holds two keys, not three for the TTL margin. It also keeps the previous window's count (field `p`), read from the previous window's
 * key when the first count of the window makes it, so later requests of the window read one key, not two.
 * What can still move the previous count after that is taken to `p` too: a refund after the edge (the
 * refund script below). A settle does not move it (it stops once the next window's key exists). Counts
 * added to the previous window after the current one's key was made by a process whose clock lags the
 * others' are the exception: the estimate leaves them out, as they came after the window they were for.
 */
/**
 * After the write that made a window's key: the key of the window before the previous is read by no one
 * now (the previous window's key keeps its count in `p`), and goes rather than live on for the TTL margin.
 * Its name is the previous window's with the index one less.
 */
const DROP_OLDER = `
      if fresh[i] then
        local s, x = string.match(KEYS[k + i], '^(.*):(%-?%d+)$')
        if s then redis.call('DEL', s .. ':' .. string.format('%d', tonumber(x) - 2)) end
      end`

function slidingWindowAdmitScript(): string {
  return batchScript(
    1,
    `for i = 1, n do
    local max, w = lims[lim + 3 * i - 2], lims[lim + 3 * i - 1]
    local e = now - math.floor(now / w) * w
    local v
    local p, kept
    recs[i], plains[i], v, p = hread(KEYS[k + i], 'n', 'p')
    local cur = tonumber(v or '0')
    kept = p
    if not p then
      -- The previous window's key: this one's name with the index one less.
      local s, x = string.match(KEYS[k + i], '^(.*):(%-?%d+)$')
      local _, _, q = hread(s .. ':' .. string.format('%d', tonumber(x) - 1), 'n')
      p = q
    end
    local prev = tonumber(p or '0')
    fresh[i] = not v
    ttls[i] = (math.floor(now / w) + 2) * w - now + ${TTL_MARGIN_MS}
    local at = 4 * (i - 1)
    writes[at + 1], writes[at + 2], writes[at + 3], writes[at + 4] = 'n', cur + cost, 'p', not kept and prev
    out[2 * i - 1] = prev
    out[2 * i] = cur
    if prev * (w - e) + (cur + cost) * w > max * w then code = 0 end
  end
  ${LUA_REPLAYED}
  ${luaHashWrites('fresh[i]', 1, 'replace', 2, DROP_OLDER)}`,
  )
}

/**
 * The refund (KEYS per limit: the call's window's key, the next window's): the cost comes off the
 * call's window's count, as counterRefundScript takes it, and off the previous count the next window's
 * key keeps (`p`) when that key exists already, so the next window reads what the memory twin reads.
 */
function slidingWindowRefundScript(): string {
  return counterRefundScript(
    2,
    `
  local next = KEYS[2 * i]
  if redis.call('TYPE', next).ok == 'hash' then
    local p = tonumber(redis.call('HGET', next, 'p') or '0')
    if p > 0 then redis.call('HINCRBY', next, 'p', -math.min(p, cost)) end
  end`,
  )
}

/** The sliding window's Lua (scripts.ts): built only when a RedisStore asks, so an app on the memory store carries none. */
export function slidingWindowScripts(): AlgorithmScripts {
  return { admit: slidingWindowAdmitScript(), settle: counterSettleScript(2), refund: slidingWindowRefundScript() }
}

function memory(windows: Windows): MemoryTwin {
  return windowTwin(
    windows,
    {
      read(call, i, values) {
        const { max, windowMs: w } = call.limits[i]!
        const group = windows.current(w, call.now, true)
        const key = windows.held(group, stem(call, i))
        const cur = countIn(group.counts, key, group.index)
        const prev = countIn(group.previous, key, group.index - 1)
        const e = call.now - windowIndex(call.now, w) * w
        values.push(prev, cur)
        return prev * (w - e) + (cur + call.cost) * w <= max * w
      },
      write(call, i) {
        windows.increment(stem(call, i), call.cost, call.limits[i]!.windowMs, call.now)
      },
      seed(call, i, prev, cur, admitted) {
        windows.seed(stem(call, i), call.limits[i]!.windowMs, call.now, admitted ? cur + call.cost : cur, prev)
      },
    },
    true,
  )
}

function verdict(out: Verdict, limit: LimitSpec, prev: number, b: number, cost: number, now: number, admitted: boolean): void {
  const { max, windowMs: W } = limit
  const start = windowIndex(now, W) * W
  const e = now - start
  const cur = admitted ? b + cost : b
  out.fits = prev * (W - e) + (b + cost) * W <= max * W
  out.count = Math.ceil((prev * (W - e)) / W) + (admitted ? cur : b + cost)
  out.remaining = Math.max(0, Math.floor((max * W - prev * (W - e) - cur * W) / W))
  out.resetAt = start + W
  out.retryAfterMs = out.fits ? 0 : retry(prev, b, cost, max, W, e)
}

/** Smallest wait after which a request of `cost` fits, with no other traffic. */
function retry(prev: number, cur: number, cost: number, max: number, W: number, e: number): number {
  if (cost > max) return 2 * W - e
  if (cur + cost <= max) {
    // Only the previous window's weight is in the way: wait until enough of it has slid out.
    return Math.max(1, Math.ceil(W - e - ((max - cur - cost) * W) / prev))
  }
  // Wait for the next window, where the current count becomes the weighted previous one.
  const into = cur === 0 ? 0 : Math.max(0, Math.ceil(W - ((max - cost) * W) / cur))
  return W - e + into
}

export const slidingWindow: Algorithm = {
  name: 'sliding-window',
  burst: false,
  refundsByCallId: false,
  keys(call: StoreCall, i: number, out: string[]) {
    // The current window's key only: the script reads the previous one (its name is this one's with the
    // index one less) only when this window's key has no copy of its count yet.
    out.push(`${stem(call, i)}:${windowIndex(call.now, call.limits[i]!.windowMs)}`)
  },
  refundKeys: counterSettleKeys,
  forgetKeys(call: StoreCall, i: number, out: string[]) {
    // The window before the previous one outlives it by the TTL margin: a reset leaves nothing.
    const s = stem(call, i)
    const w = windowIndex(call.now, call.limits[i]!.windowMs)
    out.push(`${s}:${w}`, `${s}:${w - 1}`, `${s}:${w - 2}`)
  },
  settleKeys: counterSettleKeys,
  memory,
  verdict,
  unavailable: counterUnavailable,
}
