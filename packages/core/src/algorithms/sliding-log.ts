import type { LimitSpec } from '../types'
import type { Algorithm } from './algorithm'
import { batchScript } from './batch-script'
import { type MemoryTwin, oneKeyPerLimit, TTL_MARGIN_MS, type Verdict } from './protocol'
import { addEntry, removeMember, TimeLogs } from './time-log'
import type { Windows } from './windows'

/*
 * Sliding log: exact rolling window, one entry per admitted unit, scored by time. One key per limit,
 * `<stem>:log` (a sorted set in Redis). Entries at or before now − W leave.
 * The store's numbers per limit: [entries before, time of the entry whose expiry frees enough room],
 * for an exact Retry-After.
 */

/**
 * How far ahead a log's TTL is set when it must move on: two windows plus the margin, so it moves about
 * once a window (when the newest entry would outlive it, read with PTTL), not at every request. A log
 * written by an earlier version holds a marker of its TTL scored −inf; the first removal drops it.
 */
const TTL_AHEAD = (w: string) => `2 * ${w} + ${TTL_MARGIN_MS}`

/**
 * Numbers given to Redis as integer text where they are whole: Lua turns a number into text with
 * `%.14g`, a floating-point formatting that costs about as much as a command, and the batch's calls
 * share their times and windows, so each text is made once per script run (`texts`).
 */
const LUA_TEXT = `
local UNITS = {':1', ':2', ':3', ':4'}
local texts = {}
local function text(x)
  local t = texts[x]
  if not t then
    if x == math.floor(x) and x > -1e15 and x < 1e15 then t = string.format('%d', x) else t = x end
    texts[x] = t
  end
  return t
end`

/**
 * One call of a batch (batchScript) on sorted sets of entries `<call id>:<unit>` scored by time, one per
 * limit; the concurrency algorithm runs the same (its window is a slot's longest hold; `oldest`: whether
 * the reply carries the oldest entry's time when the log has room, which the concurrency algorithm does
 * not read). Entries older than the window leave first (a range removal that finds none is the cheapest
 * of reads), then the count, then, only when the reply needs it, the time of one entry: the one whose
 * leaving frees enough room when the log is that full, else the oldest. Only the removal runs protected
 * (try): a key of another type fails there, this call alone, and the reads after it run only on a sorted
 * set or on nothing, as plain calls (a protected call and its check cost about as much as a small
 * command). Every read replies a number or one entry: a reply of several entries, or a score, costs Redis
 * more to format and the script more to read than a command. Exactly once (protocol.ts): an earlier run
 * of this batch that admitted the call left its entries, so the call's first entry is already there when
 * it is added again (ZADD NX adds none), or, when the log is full now, found by ZSCORE; either way nothing
 * is added again and the call is answered admitted. The writes: a log about to be made is checked for
 * PEXPIRE first (acl_check_cmd, which writes nothing, as luaHashWrites does), then ZADD, the first write
 * (refused at maxmemory before anything is written), then PEXPIRE when the TTL must move on, so no
 * refusal can leave a log without a TTL.
 */
function logAdmitScript(oldest: boolean): string {
  return batchScript(
    1,
    `for i = 1, n do
    local max, w = lims[lim + 3 * i - 2], lims[lim + 3 * i - 1]
    local key = KEYS[k + i]
    local c = 0
    if try('ZREMRANGEBYSCORE', key, '-inf', text(now - w)) then c = redis.call('ZCARD', key) end
    fresh[i] = c == 0
    local idx = c + cost - max - 1
    local s = now
    if idx >= 0 ${oldest ? 'or c > 0 ' : ''}then
      local at = text(idx >= 0 and idx or 0)
      local r = redis.call('ZRANGE', key, at, at, 'WITHSCORES')
      if r[2] then s = tonumber(r[2]) end
    end
    out[2 * i - 1] = c
    out[2 * i] = s
    if c + cost > max then code = 0 end
  end
  if code == 0 and cost > 0 and not failed and redis.call('ZSCORE', KEYS[k + 1], id .. ':1') then code = 2 end
  if code == 1 and cost > 0 and not failed then
    for i = 1, n do
      if fresh[i] and not (redis.acl_check_cmd and redis.acl_check_cmd('PEXPIRE', KEYS[k + i], '1')) then
        redis.call('PEXPIRE', KEYS[k + i], text(${TTL_AHEAD('lims[lim + 3 * i - 1]')}))
      end
    end
    for i = 1, n do
      local w = lims[lim + 3 * i - 1]
      local key = KEYS[k + i]
      local added = 0
      for j = 1, cost do added = added + redis.call('ZADD', key, 'NX', nowText or text(now), id .. (UNITS[j] or ':' .. j)) end
      if i == 1 and added == 0 then
        code = 2
        break
      end
      redis.call('PEXPIRE', key, text(w + ${TTL_MARGIN_MS}))
    end
  end`,
    LUA_TEXT,
  )
}

export const LOG_ADMIT_SCRIPT = logAdmitScript(true)

/** The concurrency algorithm's admit: the sliding log's, without the oldest entry's time when there is room. */
export const SLOTS_ADMIT_SCRIPT = logAdmitScript(false)

/**
 * Removes exactly the entries the call added, named by its id; the TTL stays. Run twice, the second
 * run finds nothing of the call's to remove, so this refund needs no record of its call (its key, the
 * last of KEYS, stays unwritten).
 */
export const LOG_REFUND_SCRIPT = `
local cost = tonumber(ARGV[1])
for i = 1, #KEYS - 1 do
  for j = 1, cost do redis.call('ZREM', KEYS[i], ARGV[3] .. (j == 1 and ':1' or ':' .. j)) end
end
return ARGV[3]`

/**
 * Settle (see "Settle" in protocol.ts), within one window length of the call: lower, removes the call's
 * last entries (`<id>:<actual + 1>` to `<id>:<estimate>`); higher, adds entries `<id>:<estimate + 1>` to
 * `<id>:<actual>` at the call's own time, so they leave the window with the call's, the TTL re-armed
 * first (two windows ahead). Entries are named by the call id, so a
 * settle sent twice adds or removes nothing more: no record is needed (its key, the last of KEYS, stays unwritten).
 */
const SLIDING_LOG_SETTLE_SCRIPT = `
local cost = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local actual = tonumber(ARGV[#ARGV - 1])
local settled = tonumber(ARGV[#ARGV])
for i = 1, #KEYS - 1 do
  local w = tonumber(ARGV[3 * i + 2])
  if settled < now + w then
    if actual < cost then
      for j = actual + 1, cost do redis.call('ZREM', KEYS[i], ARGV[3] .. ':' .. j) end
    elseif actual > cost then
      local fresh = redis.call('PEXPIRE', KEYS[i], ${TTL_AHEAD('w')}) == 0
      for j = cost + 1, actual do redis.call('ZADD', KEYS[i], now, ARGV[3] .. ':' .. j) end
      if fresh then redis.call('PEXPIRE', KEYS[i], ${TTL_AHEAD('w')}) end
    end
  end
end
return ARGV[3]`

function memory(windows: Windows): MemoryTwin {
  const logs = new TimeLogs(windows)
  return logs.twin(true, {
    seed(call, i, a, _b, admitted) {
      // The store's entries cannot be copied, only counted: the missing ones are added at `now`, so
      // they leave later than the store's would. The fallback then refuses a little longer, never admits more.
      const log = logs.of(call, i)
      for (let n = log.times.length; n < (admitted ? a + call.cost : a); n++) addEntry(log, call.now, `seed:${call.id}:${n}`)
    },
    settle(call, i, actual, now) {
      if (now >= call.now + call.limits[i]!.windowMs) return
      const log = actual > call.cost ? logs.of(call, i) : logs.find(call, i)
      // Higher: the entries the call lacks, at its own time, those the log does not hold already (a
      // sorted set holds a member once); lower, the call's last entries.
      for (let j = call.cost + 1; j <= actual; j++)
        if (!log!.members.includes(`${call.id}:${j}`)) addEntry(log!, call.now, `${call.id}:${j}`)
      for (let j = actual + 1; j <= call.cost; j++) removeMember(log, `${call.id}:${j}`)
    },
  })
}

function verdict(out: Verdict, limit: LimitSpec, a: number, b: number, cost: number, now: number, admitted: boolean): void {
  const { max, windowMs: W } = limit
  out.fits = a + cost <= max
  out.count = a + cost
  out.remaining = Math.max(0, max - (admitted ? a + cost : a))
  out.resetAt = a === 0 && admitted ? now + W : b + W
  out.retryAfterMs = out.fits ? 0 : cost > max ? W : Math.max(1, b + W - now)
}

export const slidingLog: Algorithm = {
  name: 'sliding-log',
  burst: false,
  refundsByCallId: true,
  keys: oneKeyPerLimit('log'),
  admitScript: LOG_ADMIT_SCRIPT,
  refundScript: LOG_REFUND_SCRIPT,
  settleKeys: oneKeyPerLimit('log'),
  settleScript: SLIDING_LOG_SETTLE_SCRIPT,
  memory,
  verdict,
  unavailable(limit, now, allow, values) {
    values.push(allow ? 0 : limit.max, now)
  },
}
