import { stem, windowIndex } from '../keys'
import type { StoreCall } from '../types'
import { LUA_REFUND_HEAD, LUA_SETTLE_HEAD, TTL_MARGIN_MS } from './protocol'

/*
 * The window algorithms' (fixed window, sliding window) refund and settle in Lua: both keep a counter
 * per window, so one script each serves both (their memory twin is windows.ts).
 */

/**
 * A counter in Lua, for refunds and settles: a hash with its count in field `n` (written by an admit
 * script, beside its records of exactly once) or a plain integer (the fixed window's transaction path).
 * TYPE tells which; these scripts run once per refunded or settled call at most, not per decision.
 */
const LUA_COUNTER = `
local function countOf(key)
  if redis.call('TYPE', key).ok == 'hash' then return tonumber(redis.call('HGET', key, 'n') or '0'), true end
  return tonumber(redis.call('GET', key) or '0'), false
end
local function add(key, hash, delta)
  if hash then redis.call('HINCRBY', key, 'n', delta) else redis.call('INCRBY', key, delta) end
end`

/**
 * Refund of the window algorithms in Lua: takes the cost off the current window's counter of each
 * limit (the first of its `step` keys), never below zero, once per call (LUA_REFUND_HEAD). The key keeps
 * its TTL. A later window has other keys, so a refund arriving after the edge changes nothing. `more`:
 * Lua run for each limit after that (the sliding window's).
 */
export function counterRefundScript(step: number, more = ''): string {
  return `${LUA_REFUND_HEAD()}${LUA_COUNTER}
for i = 1, n / ${step} do
  local key = KEYS[(i - 1) * ${step} + 1]
  local c, hash = countOf(key)
  if c > 0 then add(key, hash, -math.min(c, cost)) end${more}
end
return ARGV[3]`
}

/**
 * Settle of the window algorithms in Lua (see "Settle" in protocol.ts): KEYS per limit are the call's
 * window's key and the next window's. The difference goes onto the call's window's counter (down never
 * below zero; up with a missing key made with its TTL first: a plain counter by SET ... NX for the fixed
 * window, a hash for the sliding window, PEXPIRE before and after its HSET as the admit writes it), when
 * the settle's time is in that window and the next window's key does not exist.
 */
export function counterSettleScript(windowsAhead: number): string {
  return `${LUA_SETTLE_HEAD()}${LUA_COUNTER}
for i = 1, n / 2 do
  local w = tonumber(ARGV[3 * i + 2])
  local key = KEYS[2 * i - 1]
  if math.floor(settled / w) == math.floor(now / w) and redis.call('EXISTS', KEYS[2 * i]) == 0 then
    local c, hash = countOf(key)
    local ttl = (math.floor(now / w) + ${windowsAhead}) * w - settled + ${TTL_MARGIN_MS}
    if delta > 0 and not hash and ${windowsAhead === 1 ? 'true' : "redis.call('EXISTS', key) == 1"} then
      redis.call('SET', key, '0', 'PX', ttl, 'NX')
      redis.call('INCRBY', key, delta)
    elseif delta > 0 then
      local fresh = redis.call('PEXPIRE', key, ttl) == 0
      redis.call('HINCRBY', key, 'n', delta)
      if fresh then redis.call('PEXPIRE', key, ttl) end
    elseif c > 0 then
      add(key, hash, -math.min(c, -delta))
    end
  end
end
return ARGV[3]`
}

/** Settle keys of a window algorithm: the call's window's key and the next window's, per limit. */
export function counterSettleKeys(call: StoreCall, i: number, out: string[]): void {
  const s = stem(call, i)
  const w = windowIndex(call.now, call.limits[i]!.windowMs)
  out.push(`${s}:${w}`, `${s}:${w + 1}`)
}
