import type { LimitSpec } from '../types'
import type { Algorithm, AlgorithmScripts } from './algorithm'
import { batchScript, LUA_REPLAYED, luaHashWrites } from './batch-script'
import { gcraMemory } from './gcra-memory'
import { LUA_REFUND_HEAD, LUA_SETTLE_HEAD, oneKeyPerLimit, TTL_MARGIN_MS, type Verdict } from './protocol'

/*
 * Generic cell rate algorithm (as redis-cell's CL.THROTTLE): one emission interval T = W / max per
 * unit; a request fits while its theoretical arrival time (TAT) stays within burst × T of now.
 * One key per limit, `<stem>:gcra`, holding the TAT; it expires when the bucket would be full again,
 * so an idle client leaves nothing.
 * The store's numbers per limit: [TAT before (at least now), TAT after admitting], in ms, fractional
 * when W / max is not a whole number of ms.
 */

/**
 * A TAT's ms and rem from fields `t` and `r`, or from text in `t` as earlier versions wrote it ("ms:rem",
 * or "ms" from before the remainder was kept).
 */
const LUA_TAT_TEXT = `
local function tatText(t, r)
  local ms = tonumber(t)
  if ms then return ms, tonumber(r) or 0 end
  local m, rr = string.match(t, '^(-?%d+):(%d+)')
  return tonumber(m), tonumber(rr or '0')
end`

/**
 * One call of a batch (batchScript). The key is a hash: the TAT in fields `t` (ms) and `r` (rem), as
 * numbers, beside the records of exactly once (protocol.ts). A request fits when its new TAT minus
 * burst × T is not after now, compared multiplied by max, in integers. The reply gives each TAT as its
 * distance from now in units of 1/max ms, an integer (a Lua number that is not one would be truncated in
 * the reply, and formatting one as text cost more than a Redis command), which `fromScript` turns back
 * into ms. The key goes once the bucket would be full again (the TAT plus the margin), give or take a
 * window: field `e` holds when its TTL runs out, and a write that moves the TAT past it sets the TTL a
 * window further on, so a busy key's TTL is set about once a window rather than at every request. Every
 * other writer of the TAT (lease, refund, settle) sets `e` to 0, so the next admit sets the TTL again.
 * A TAT written as text ("ms:rem", or "ms" from before the remainder was kept), as earlier versions did,
 * is read as well (LUA_TAT_TEXT).
 */
function gcraAdmitScript(): string {
  return batchScript(
    1,
    `for i = 1, n do
    local max = lims[lim + 3 * i - 2]
    local w = lims[lim + 3 * i - 1]
    local burst = lims[lim + 3 * i]
    local ms, rem = now, 0
    local t, r, e
    recs[i], plains[i], t, r, e = hread(KEYS[k + i], 't', 'r', 'e')
    fresh[i] = not t
    local armed = tonumber(e) or 0
    if t then
      local sm, sr = tatText(t, r)
      if sm and (sm > now or (sm == now and sr > 0)) then ms, rem = sm, sr end
    end
    local before = 0
    if max > 0 then
      before = (ms - now) * max + rem
      local sum = rem + cost * w
      local carry = math.floor(sum / max)
      ms = ms + carry
      rem = sum - carry * max
      if (ms - now) * max + rem > burst * w then code = 0 end
    else
      code = 0
    end
    out[2 * i - 1] = before
    out[2 * i] = (ms - now) * max + rem
    ttls[i] = false
    local rearmed = false
    if plains[i] or ms + ${TTL_MARGIN_MS + 1} > armed then
      ttls[i] = ms - now + ${TTL_MARGIN_MS + 1} + w
      rearmed = now + ttls[i]
    end
    local at = 6 * (i - 1)
    writes[at + 1], writes[at + 2], writes[at + 3], writes[at + 4], writes[at + 5], writes[at + 6] = 't', ms, 'r', rem, 'e', rearmed
  end
  ${LUA_REPLAYED}
  ${luaHashWrites('ttls[i]', 1, 'replace', 3)}`,
    LUA_TAT_TEXT,
  )
}

/** The TAT of a GCRA key in Lua, for refunds, settles and leases (nil when there is none), and its writer (`e` 0: see gcraAdmitScript). */
export const LUA_TAT = (): string => `${LUA_TAT_TEXT}
local function tatOf(key)
  local v = redis.call('HMGET', key, 't', 'r')
  if not v[1] then return nil end
  return tatText(v[1], v[2])
end
local function setTat(key, ms, rem)
  redis.call('HSET', key, 't', ms, 'r', rem, 'e', 0)
end`

/** Back by cost × T, exactly, in the "<ms>:<rem>" form, once per call; the key goes when the bucket is full again. HSET keeps its TTL. */
const GCRA_REFUND_SCRIPT = (): string => `${LUA_REFUND_HEAD()}${LUA_TAT()}
for i = 1, n do
  local max = tonumber(ARGV[3 * i + 1])
  local ms, rem = tatOf(KEYS[i])
  if ms and max > 0 then
    local sum = rem - cost * tonumber(ARGV[3 * i + 2])
    local carry = math.floor(sum / max)
    ms = ms + carry
    rem = sum - carry * max
    if ms > now or (ms == now and rem > 0) then
      setTat(KEYS[i], ms, rem)
    else
      redis.call('DEL', KEYS[i])
    end
  end
end
return ARGV[3]`

/**
 * Settle (see "Settle" in protocol.ts), within one window length of the call: lower, the TAT moves back
 * by the difference × T, as a refund does (at or before the settle's time, the key goes); higher, it moves
 * on by the difference × T from the stored TAT, or from where the call alone left it (its time plus
 * its estimate × T) when that is later or the key has gone: as if the call had cost its actual cost. A TAT
 * moved on is written with its TTL (until the bucket is full again); one still at or before the settle's
 * time is left alone.
 */
const GCRA_SETTLE_SCRIPT = (): string => `${LUA_SETTLE_HEAD()}${LUA_TAT()}
for i = 1, n do
  local max = tonumber(ARGV[3 * i + 1])
  local w = tonumber(ARGV[3 * i + 2])
  if max > 0 and settled < now + w then
    local ms, rem = tatOf(KEYS[i])
    local stored = ms ~= nil
    if delta > 0 then
      local sum = cost * w
      local own, ownRem = now + math.floor(sum / max), sum % max
      if not ms or own > ms or (own == ms and ownRem > rem) then ms, rem = own, ownRem end
    end
    if ms then
      local sum = rem + delta * w
      local carry = math.floor(sum / max)
      ms = ms + carry
      rem = sum - carry * max
      if ms > settled or (ms == settled and rem > 0) then
        if delta > 0 then
          local ttl = ms - settled + ${TTL_MARGIN_MS}
          if rem > 0 then ttl = ttl + 1 end
          local fresh = redis.call('PEXPIRE', KEYS[i], ttl) == 0
          setTat(KEYS[i], ms, rem)
          if fresh then redis.call('PEXPIRE', KEYS[i], ttl) end
        else
          setTat(KEYS[i], ms, rem)
        end
      elseif stored and delta < 0 then
        redis.call('DEL', KEYS[i])
      end
    end
  end
end
return ARGV[3]`

/**
 * T is rarely a whole number of ms, so the TATs are brought back to whole units of 1/max ms (what the
 * stores count in) and compared as integers: with a floating T = 333.33…, a ratio such as
 * (burst × T − (TAT − now)) / T can land just below a whole number and floor one unit short. Rounding
 * recovers the stores' exact value whenever T is whole (the TATs are then whole ms) and otherwise while
 * max < 4096: a TAT near today's epoch ms holds its fraction to 2^-13 ms.
 */
function verdict(out: Verdict, limit: LimitSpec, a: number, _b: number, cost: number, now: number, admitted: boolean): void {
  const { max, windowMs: W, burst } = limit
  if (max > 0) {
    const before = Math.max(0, Math.round((a - now) * max))
    // The TAT after admitting `cost`, in the same units: what the store's second number holds for a
    // call of this cost, and what `peek` (a read of cost 0) asks about for one more unit.
    const after = before + cost * W
    const full = burst * W
    const tat = admitted ? after : before
    out.fits = after <= full
    out.remaining = Math.max(0, Math.floor((full - tat) / W))
    out.resetAt = now + Math.ceil(tat / max)
    out.retryAfterMs = out.fits ? 0 : Math.ceil((after - full) / max)
  } else {
    out.fits = false
    out.remaining = 0
    out.resetAt = now
    out.retryAfterMs = W
  }
  out.count = burst - out.remaining
}

/** GCRA's Lua (scripts.ts): built only when a RedisStore asks, so an app on the memory store carries none. */
export function gcraScripts(): AlgorithmScripts {
  return { admit: gcraAdmitScript(), refund: GCRA_REFUND_SCRIPT(), settle: GCRA_SETTLE_SCRIPT() }
}

export const gcra: Algorithm = {
  name: 'gcra',
  fromScript(call, values) {
    // The script's distances from now, in units of 1/max ms (gcraAdmitScript), back to TATs in ms.
    for (let i = 0; i < call.limits.length; i++) {
      const { max } = call.limits[i]!
      values[2 * i] = max > 0 ? call.now + values[2 * i]! / max : call.now
      values[2 * i + 1] = max > 0 ? call.now + values[2 * i + 1]! / max : call.now
    }
  },
  burst: true,
  refundsByCallId: false,
  keys: /* @__PURE__ */ oneKeyPerLimit('gcra'),
  settleKeys: /* @__PURE__ */ oneKeyPerLimit('gcra'),
  memory: gcraMemory,
  verdict,
  unavailable(limit, now, allow, values) {
    values.push(now, allow ? now : now + limit.windowMs * 2)
  },
}
