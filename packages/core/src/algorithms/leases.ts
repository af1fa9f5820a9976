import { windowIndex } from '../keys'
import type { LeaseGrant, LeaseRequest } from '../types'
import { LUA_TAT } from './gcra'
import { TTL_MARGIN_MS } from './protocol'

/*
 * Quota leasing (the `lease` option): a process reserves a slice of a key's remaining quota in one
 * atomic script and decides from it locally. Redis's count is everything granted, so the sum of what
 * the processes admit never passes what Redis granted, and Redis never grants past `max`.
 *
 * Keys, all in the client's hash tag and all with a TTL:
 * - the algorithm's own key (`<stem>:<window index>` for the fixed window, `<stem>:gcra`), shared with
 *   processes that count without leasing: a grant is counted there like an INCRBY of its size;
 * - `<key>:lessees`, how many processes hold a lease on the key;
 * - `<key>:lessee:<owner>`, this process's marker. A grant made while the process believes it holds
 *   one, and finds it gone, means Redis lost its data (a restart, a flush): see leaseFixedScript.
 *
 * Only GET, SET, INCRBY, DECRBY, PEXPIRE, DEL and, for GCRA's TAT, HMGET and HSET run inside the scripts, so the least-privilege ACL
 * user the README documents can run them.
 */

/** The keys of a lease script, in order: the algorithm's key, the lessee counter, the marker. */
export function leaseKeys(r: Pick<LeaseRequest, 'algorithm' | 'stem' | 'limit' | 'now' | 'owner'>): string[] {
  const key = r.algorithm === 'gcra' ? `${r.stem}:gcra` : `${r.stem}:${windowIndex(r.now, r.limit.windowMs)}`
  return [key, `${key}:lessees`, `${key}:lessee:${r.owner}`]
}

/** TTL of the keys of a lease: the fixed window's rest plus the margin; for GCRA, one window length. */
export function leaseTtl(r: Pick<LeaseRequest, 'algorithm' | 'limit' | 'now'>): number {
  const { windowMs } = r.limit
  if (r.algorithm === 'gcra') return windowMs + TTL_MARGIN_MS
  return (windowIndex(r.now, windowMs) + 1) * windowMs - r.now + TTL_MARGIN_MS
}

/** ARGV of a lease script: max, asked, maxShare, ttl, held, adjust, now, window, burst. */
export function leaseArgs(r: LeaseRequest): (string | number)[] {
  const { max, windowMs, burst } = r.limit
  return [max, r.asked, r.maxShare, leaseTtl(r), r.held, r.adjust, r.now, windowMs, burst]
}

/**
 * The lessee half shared by both scripts: the marker is made (and the lessee counted) at a process's
 * first grant under it; missing while the process holds units (`held` > 0) means Redis lost the key.
 * The marker made then says so ('lost') until the process asks holding nothing: a call of the process
 * that Redis ran after the loss but whose reply the process never got (its deadline ran out while the
 * client resent it) must not leave a marker that hides the loss from the process's next call
 * (restarted = 2: the units were put back already, by that call).
 * `sliding`: the keys' TTL runs from now (GCRA), so every grant sets it again. For the fixed window it
 * is the window's end plus the margin whenever it is set, so the counter's and the marker's are set
 * once, when the marker is made: the grants of a hot key then run no command that would change nothing.
 */
const luaLessee = (sliding: boolean) => `
local max, asked, share = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local ttl, held, adjust = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local restarted = 0
local marker = redis.call('GET', KEYS[3])
local fresh = not marker
if fresh then
  if held > 0 then restarted = 1 end
  redis.call('INCRBY', KEYS[2], 1)
elseif marker == 'lost' and held > 0 then
  restarted = 2
end
local value = '1'
if restarted > 0 then value = 'lost' end
if fresh or ${sliding} then redis.call('PEXPIRE', KEYS[2], ttl) end
if fresh or ${sliding} or marker ~= value then redis.call('SET', KEYS[3], value, 'PX', ttl) end
local lessees = tonumber(redis.call('GET', KEYS[2]) or '1')
if lessees < 1 then lessees = 1 end
local function slice(left)
  local n = math.floor(left * share / lessees)
  if n < 1 then n = 1 end
  if n > asked then n = asked end
  return n
end`

/**
 * Fixed window. KEYS: the window's count, the lessee counter, the marker. ARGV: leaseArgs.
 * The off-book units (`adjust`) go into the count first. After a loss (restarted) the units this
 * process holds go back into the count too, so the processes that lease next see them, and nothing is
 * granted: the process refuses the key until the window ends (it cannot know what the others hold).
 * Otherwise the grant is min(asked, floor(left × share / lessees)), at least 1 while anything is left.
 * The ask is counted first (INCRBY, which returns the count before it too) and what was not granted taken
 * back (DECRBY): far from the limit the grant is the ask, and a hot key's grant runs one command on the
 * count instead of a GET and an INCRBY. The count's TTL is set when the count was 0 (the INCRBY may have
 * made the key; whoever made it before set the same one). Reply: {granted, left after, lessees, restarted, 0}.
 */
export function leaseFixedScript(): string {
  return `${luaLessee(false)}
if restarted == 1 then adjust = adjust + held end
if restarted > 0 then restarted = 1 end
if adjust > 0 then
  redis.call('INCRBY', KEYS[1], adjust)
  redis.call('PEXPIRE', KEYS[1], ttl)
end
local granted, left = 0, 0
if restarted == 0 and asked >= 1 then
  local count = redis.call('INCRBY', KEYS[1], asked) - asked
  if count == 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
  left = max - count
  if left >= 1 then granted = slice(left) end
  if granted < asked then redis.call('DECRBY', KEYS[1], asked - granted) end
  left = left - granted
else
  left = max - tonumber(redis.call('GET', KEYS[1]) or '0')
end
if left < 0 then left = 0 end
return {granted, left, lessees, restarted, 0}`
}

/**
 * GCRA. KEYS: the TAT (fields `t` and `r`, as gcra.ts keeps it), the lessee counter, the marker. ARGV: leaseArgs.
 * Unspent units of a lapsed slice (`adjust`) move the TAT back first, as a refund does. The units
 * that fit are floor((burst × W − (TAT − now) × max) / W); the grant is a slice of them as for the
 * fixed window, and moves the TAT on by granted × W / max, exactly, with its TTL. After a loss nothing
 * is granted. Reply: {granted, units left after, lessees, restarted, ms until a unit fits}.
 */
export function leaseGcraScript(): string {
  return `${luaLessee(true)}${LUA_TAT()}
local now, w, burst = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local ms, rem = now, 0
local sm, sr = tatOf(KEYS[1])
if sm and (sm > now or (sm == now and sr > 0)) then ms, rem = sm, sr end
local function move(units)
  local sum = rem + units * w
  local carry = math.floor(sum / max)
  ms = ms + carry
  rem = sum - carry * max
  if ms < now then ms, rem = now, 0 end
end
if adjust > 0 and max > 0 then move(-adjust) end
local offset = (ms - now) * max + rem
local fit = 0
if max > 0 then fit = math.floor((burst * w - offset) / w) end
if fit < 0 then fit = 0 end
local granted = 0
if restarted == 0 and fit >= 1 and asked >= 1 then
  granted = slice(fit)
  move(granted)
  fit = fit - granted
end
local waitMs = 0
if fit < 1 and max > 0 then waitMs = math.ceil(((ms - now) * max + rem + w - burst * w) / max) end
if ms > now or rem > 0 then
  local keep = ms - now + ${TTL_MARGIN_MS}
  if rem > 0 then keep = keep + 1 end
  local fresh = redis.call('PEXPIRE', KEYS[1], keep) == 0
  setTat(KEYS[1], ms, rem)
  if fresh then redis.call('PEXPIRE', KEYS[1], keep) end
end
return {granted, fit, lessees, restarted, waitMs}`
}

/**
 * Gives back `ARGV[1]` unspent units and ends the lease. KEYS and the other ARGV as the lease scripts.
 * Only under this process's marker: without it Redis lost the key's count, and taking units off a
 * count that no longer holds them would let others pass `max`. Fixed window: DECRBY, never below 0.
 * GCRA: the TAT moves back by the units (a refund). Then the lessee counter goes down and the marker goes.
 */
export function leaseReturnScript(): string {
  return `${LUA_TAT()}
if not redis.call('GET', KEYS[3]) then return 0 end
local back, gcra = tonumber(ARGV[1]), ARGV[2] == 'gcra'
if back > 0 and not gcra then
  local c = tonumber(redis.call('GET', KEYS[1]) or '0')
  if back > c then back = c end
  if back > 0 then redis.call('DECRBY', KEYS[1], back) end
elseif back > 0 then
  local max, w, now = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  local ms, rem = tatOf(KEYS[1])
  if ms and max > 0 then
    local sum = rem - back * w
    local carry = math.floor(sum / max)
    ms = ms + carry
    rem = sum - carry * max
    if ms > now or (ms == now and rem > 0) then
      setTat(KEYS[1], ms, rem)
    else
      redis.call('DEL', KEYS[1])
    end
  end
end
if tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then redis.call('DECRBY', KEYS[2], 1) end
redis.call('DEL', KEYS[3])
return 1`
}

/** ARGV of leaseReturnScript. */
export function returnArgs(r: Pick<LeaseRequest, 'algorithm' | 'limit' | 'now'>, back: number): (string | number)[] {
  return [back, r.algorithm, r.limit.max, r.limit.windowMs, r.now]
}

/** A script's reply as a LeaseGrant, or undefined when it is not one (a reply out of step). */
export function leaseGrantOf(reply: unknown): LeaseGrant | undefined {
  if (!Array.isArray(reply) || reply.length !== 5 || !reply.every((v) => typeof v === 'number' && Number.isSafeInteger(v))) return undefined
  const [granted, left, lessees, restarted, waitMs] = reply as number[]
  if (granted! < 0 || left! < 0 || lessees! < 1) return undefined
  return { granted: granted!, left: left!, lessees: lessees!, restarted: restarted! > 0, waitMs: waitMs! }
}

/**
 * How many units to ask for: the recent rate (units per ms) over half the window, at most five
 * seconds of traffic, at least what the request needs. Slices then cover many requests on a busy key
 * (a grant runs a handful of commands, however many units it carries) and one on a quiet one; Redis
 * shrinks them further as the
 * window's quota runs out and as more processes lease the key, so a larger ask never takes more than
 * its share near the limit.
 */
export function unitsToAsk(ratePerMs: number, windowMs: number, need: number): number {
  const span = Math.min(windowMs / 2, 5000)
  return Math.max(need, 1, Math.ceil(ratePerMs * span))
}
