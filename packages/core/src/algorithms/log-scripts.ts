import type { AlgorithmScripts } from './algorithm'
import { batchScript } from './batch-script'
import { TTL_MARGIN_MS } from './protocol'

/*
 * The Lua of the sorted-set algorithms, the sliding log (sliding-log.ts) and concurrency (concurrency.ts):
 * one key per limit, a sorted set of entries `<call id>:<unit>` scored by time, and one marker member that
 * keeps the period of its TTL. Built only when a RedisStore asks (scripts.ts).
 */
/**
 * A log's TTL moves once per period of its window (now / W, rounded down), at the period's first admission,
 * to two periods ahead plus the margin: every entry then outlives its window (plus the margin), since an
 * entry of period P is covered by a TTL set in P or later, and a hot log runs no PEXPIRE at each admission.
 * The period whose first admission set the TTL is kept in the log itself, in the score of one member, `~`,
 * at its head: −1 − (P mod 2^20), below every entry's time (entries leave by a range from 0, which keeps
 * it). The admission's ZADD writes it beside the entries, with CH, so its reply counts the marker when it
 * moved: a new period, or a log without one. The period is kept modulo 2^20 because a log whose TTL was
 * not moved for two periods is gone. An earlier version's admission, which set the TTL at each call,
 * removes the marker (its range from −inf), so the next admission here moves the TTL again.
 */
const MARK = (p: string) => `-1 - ${p} % 1048576`
const TTL_AHEAD = (w: string) => `2 * ${w} + ${TTL_MARGIN_MS}`

/** Names of an entry's unit, made once: `<call id>` .. UNITS[j]. */
const LUA_UNITS = `
local UNITS = {':1', ':2', ':3', ':4'}
local excl = {}
local function above(x)
  local t = excl[x]
  if not t then
    t = '(' .. text(x)
    excl[x] = t
  end
  return t
end`

/**
 * The reads of both algorithms: the entries held, counted among the live ones (scored after now − W), which
 * leaves out the marker and the entries that left the window (they leave once per period: LOG_MOVED), so
 * an admission is a count and a ZADD, and a log an earlier version wrote, without the marker, is counted
 * the same. Then, only when the reply needs it, one entry's time, by its place from the newest (the live
 * entries are the newest): when the call does not fit, the entry whose leaving frees enough room; for the
 * sliding log (`full`), also when the call fills the log, the oldest, whose leaving frees the next unit.
 */
const LOG_READS = (full: boolean): string => `
    local c = try('ZCOUNT', key, above(now - w), '+inf') or 0
    local idx = c + cost - max - 1
    local s = now
    if idx >= ${full ? '-1' : '0'} and idx < c${full ? ' and c > 0' : ''} then
      local at = text((idx > 0 and idx or 0) - c)
      local r = redis.call('ZRANGE', key, at, at, 'WITHSCORES')
      if r[2] then s = tonumber(r[2]) end
    end`

/**
 * The work when the marker moved: the TTL, then the entries that left the window (the slots of holders that
 * died). The reads do not tell whether the log is new, so nothing is checked before the writes: when Redis
 * refuses the PEXPIRE (NOPERM), the call's entries come out again, from every log it was written to, with
 * this log's marker, so no log is left without a TTL, and the refusal is the script's.
 */
const LOG_MOVED = (): string => `
        local e = redis.pcall('PEXPIRE', key, text((p + 2) * w + ${TTL_MARGIN_MS} - now))
        if type(e) == 'table' and e.err then
          for l = 1, i do
            for j = 1, cost do redis.call('ZREM', KEYS[k + l], id .. (UNITS[j] or ':' .. j)) end
          end
          redis.call('ZREM', key, '~')
          error(e)
        end
        redis.call('ZREMRANGEBYSCORE', key, '0', text(now - w))`

/**
 * One call of a batch (batchScript) on sorted sets of entries `<call id>:<unit>` scored by time, one per
 * limit, for both algorithms (the concurrency algorithm's window is a slot's longest hold): LOG_READS, then,
 * when the call fits, one ZADD of the entries and the marker (MARK), the first write (refused at maxmemory
 * before anything is written), then LOG_MOVED when the marker moved. Only the count runs protected (try): a
 * key of another type fails there, this call alone, and the read after it runs only on a sorted set or on
 * nothing, as a plain call (a protected call and its check cost about as much as a small command). Every
 * read replies a number or one entry: a reply of several entries, or a score, costs Redis more to format and
 * the script more to read than a command. Exactly once (protocol.ts): an earlier run of this batch that
 * admitted the call left its entries, so its entries are already there when they are added again (ZADD
 * adds none: an entry's time is the call's, so it does not move either), or, when the log is full now, the
 * first is found by ZSCORE; either way nothing is added again and the call is answered admitted.
 * `full`: the sliding log, which reads the oldest entry when the call fills the log (LOG_READS).
 */
function logAdmitScript(full: boolean): string {
  return batchScript(
    1,
    `for i = 1, n do
    local max, w = lims[lim + 3 * i - 2], lims[lim + 3 * i - 1]
    local key = KEYS[k + i]
${LOG_READS(full)}
    out[2 * i - 1] = c
    out[2 * i] = s
    if c + cost > max then code = 0 end
  end
  if code == 0 and cost > 0 and not failed and redis.call('ZSCORE', KEYS[k + 1], id .. ':1') then code = 2 end
  if code == 1 and cost > 0 and not failed then
    for i = 1, n do
      local w = lims[lim + 3 * i - 1]
      local key = KEYS[k + i]
      local p = math.floor(now / w)
      local moved
      if cost == 1 then
        moved = redis.call('ZADD', key, 'CH', nowText or text(now), id .. ':1', text(${MARK('p')}), '~') - 1
      else
        local args = {'ZADD', key, 'CH'}
        for j = 1, cost do
          args[2 * j + 2] = nowText or text(now)
          args[2 * j + 3] = id .. (UNITS[j] or ':' .. j)
        end
        args[2 * cost + 4] = text(${MARK('p')})
        args[2 * cost + 5] = '~'
        moved = redis.call(unpack(args)) - cost
      end
      -- Nothing added (the marker may have moved back to this call's period): an earlier run admitted the call.
      if i == 1 and moved < 0 then
        code = 2
        break
      end
      if moved == 1 then
${LOG_MOVED()}
      end
    end
  end`,
    LUA_UNITS,
  )
}

/** The sliding log's Lua (scripts.ts): built only when a RedisStore asks, so an app on the memory store carries none. */
export function slidingLogScripts(): AlgorithmScripts {
  return {
    admit: logAdmitScript(true),
    refund: LOG_REFUND_SCRIPT(),
    refundBatch: LOG_REFUND_BATCH_SCRIPT(),
    settle: slidingLogSettleScript(),
  }
}

/** The concurrency algorithm's Lua: the sliding log's, without its read of the oldest entry, and no settle. */
export function concurrencyScripts(): AlgorithmScripts {
  // A slot is held or free, whatever the units: a settle moves nothing (the limiter refuses actualCost).
  return { admit: logAdmitScript(false), refund: LOG_REFUND_SCRIPT(), refundBatch: LOG_REFUND_BATCH_SCRIPT(), settle: 'return ARGV[3]' }
}

/**
 * Removes exactly the entries the call added, named by its id; the TTL stays. Run twice, the second
 * run finds nothing of the call's to remove, so this refund needs no record of its call (its key, the
 * last of KEYS, stays unwritten).
 */
const LOG_REFUND_SCRIPT = (): string => `
local cost = tonumber(ARGV[1])
for i = 1, #KEYS - 1 do
  for j = 1, cost do redis.call('ZREM', KEYS[i], ARGV[3] .. (j == 1 and ':1' or ':' .. j)) end
end
return ARGV[3]`

/**
 * The refunds (a concurrency slot's releases) of one turn in one script run, in correctionBatchScript's
 * layout but with only what a removal needs: per call its limits' keys (no record key: a removal by call id
 * needs none) and the arguments [cost, id]. A release is one ZREM per unit and runs on every admitted
 * request: sent with the admit's whole argument list and a record key, each as a function of its own under
 * pcall, it cost Redis more than the admit it undoes. A key of another type fails its call alone
 * (WRONGTYPE, the keys after it left as they are); any other error is the batch's.
 */
const LOG_REFUND_BATCH_SCRIPT = (): string => `
local out, k, a = {}, 0, 1
for c = 1, tonumber(ARGV[1]) do
  local nk, na = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local cost, id = tonumber(ARGV[a + 3]), ARGV[a + 4]
  local reply = id
  for i = k + 1, k + nk do
    for j = 1, cost do
      local r = redis.pcall('ZREM', KEYS[i], id .. (j == 1 and ':1' or ':' .. j))
      if type(r) == 'table' and r.err then
        if not string.find(r.err, 'WRONGTYPE', 1, true) then error(r) end
        reply = {'err', r.err}
        break
      end
    end
    if reply ~= id then break end
  end
  out[c] = reply
  k, a = k + nk, a + 2 + na
end
return out`

/**
 * Settle (see "Settle" in protocol.ts), within one window length of the call: lower, removes the call's
 * last entries (`<id>:<actual + 1>` to `<id>:<estimate>`); higher, adds entries `<id>:<estimate + 1>` to
 * `<id>:<actual>` at the call's own time, so they leave the window with the call's: the TTL the call's
 * admission set (MARK) covers them, and a log the settle makes again (it expired or was reset) gets its
 * marker and a TTL two windows ahead. Entries are named by the call id, so a settle sent twice adds or
 * removes nothing more: no record is needed (its key, the last of KEYS, stays unwritten).
 */
function slidingLogSettleScript(): string {
  return `
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
      if fresh then
        redis.call('ZADD', KEYS[i], ${MARK('math.floor(now / w)')}, '~')
        redis.call('PEXPIRE', KEYS[i], ${TTL_AHEAD('w')})
      end
    end
  end
end
return ARGV[3]`
}
