import type { LimitSpec, StoreCall } from '../types'

/*
 * The admit scripts' batch: several calls of one algorithm decided in one script run, each by the
 * algorithm's body in turn, and the record of exactly once every hash-keyed algorithm keeps in its own
 * key (see the top of protocol.ts for the calling convention and the record).
 */

/** Calls in one admit script at most: a batch stalls Redis for its other clients no longer than a few hundred µs. */
export const MAX_BATCH_CALLS = 64

/** Bits of the mask in a record: the batches before the last that a record still tells apart. */
const MASK_BITS = 20

/** Where a store's batch sequence starts again: a record's last sequence times 2^MASK_BITS stays below 2^53. */
export const MAX_BATCH_SEQUENCE = 2 ** 32

/**
 * The record of exactly once (see the top of this file), kept in the field `inst` of each hash an admit
 * writes: one number, last × 2^20 + mask, bit d of the mask set when batch `last − d` was admitted there
 * (a number, not text: parsing and formatting text cost more than the rest of the record). `seen(rec)` is
 * true when this batch (`seq`) was; `marked(rec)` is the record with its bit set. Plain arithmetic on
 * doubles, exact below 2^53. After the sequence starts again (MAX_BATCH_SEQUENCE), a key's older record
 * reads as "not seen" until the key expires: counted, as before calls were recorded.
 */
export const LUA_SEEN = (): string => `
local function seen(rec)
  rec = tonumber(rec)
  if not rec then return false end
  local d = math.floor(rec / ${2 ** MASK_BITS}) - seq
  return d >= 0 and d < ${MASK_BITS} and math.floor((rec % ${2 ** MASK_BITS}) / 2 ^ d) % 2 == 1
end
local function marked(rec)
  rec = tonumber(rec)
  if not rec then return seq * ${2 ** MASK_BITS} + 1 end
  local l, m = math.floor(rec / ${2 ** MASK_BITS}), rec % ${2 ** MASK_BITS}
  if seq > l then
    if seq - l >= ${MASK_BITS} then m = 1 else m = (m * 2 ^ (seq - l)) % ${2 ** MASK_BITS} + 1 end
    l = seq
  elseif l - seq < ${MASK_BITS} and math.floor(m / 2 ^ (l - seq)) % 2 == 0 then
    m = m + 2 ^ (l - seq)
  end
  return l * ${2 ** MASK_BITS} + m
end`

/**
 * `text(x)`: a number as the text Redis is given. Redis 7.0 turns a Lua number passed to a command into
 * text with `%.17g`, a floating-point formatting that costs about as much as a command; a whole number
 * formatted by Lua as an integer costs a small part of that, and a batch's calls share many of their numbers
 * (times, windows, TTLs), so each text is made once per script run. A fraction is passed as the number.
 */
export const LUA_TEXT = `
local texts = {}
local function text(x)
  local t = texts[x]
  if not t then
    if x == math.floor(x) and x > -9007199254740992 and x < 9007199254740992 then t = string.format('%d', x) else t = x end
    texts[x] = t
  end
  return t
end`

/**
 * The admit script of an algorithm: `body` decides one call, the batch's calls in turn. It sees `id`,
 * `cost`, `now`, `n` (its limits), `k` (its keys are KEYS[k + 1] on, `perLimit` per limit), `lim` (limit
 * i's max is lims[lim + 3i − 2], its windowMs the next, its burst the next, as numbers), `inst` and `seq` (the
 * record's field and this batch, LUA_SEEN), and fills `out` (2n numbers) and `code` (1 admitted, 0 refused,
 * 2 admitted by an earlier run, 3 recorded by an earlier run, LUA_REPLAYED); after a 3, the calls left get 4
 * without running. The tables `out`, `recs`, `fresh`, `ttls`, `writes` and `plains` are the script's, reused by
 * every call (a body sets what it reads; a table per call cost more than a Redis command). `nowText`: the
 * call's time as the text it came in, when every call of the batch has it (a number written as text costs
 * Redis a conversion), else nil.
 * `try(command, ...)` runs a read whose WRONGTYPE fails this call alone: it returns
 * false, and the call's code becomes -1 with the error as its first number; any other error (NOPERM) is
 * the script's, as a plain call's would be. `hread(key, fields...)` reads a hash-keyed algorithm's key:
 * this store's record (read as a number once: seen and marked both use it), false, and the fields' values; or, from a plain string (the fixed window's
 * transaction path writes those, and earlier versions wrote every counter and TAT so), nil, true and
 * its value. `prelude`: Lua of the algorithm's own, defined once before the calls.
 */
export function batchScript(perLimit: number, body: string, prelude = ''): string {
  // Only the helpers the body calls: what a script calls is what a Redis user is told it needs (permissions.ts).
  const hread = body.includes('hread(')
    ? `
local function hread(key, ...)
  local v = redis.pcall('HMGET', key, inst, ...)
  if type(v) == 'table' and v.err then
    if not string.find(v.err, 'WRONGTYPE', 1, true) then error(v) end
    return nil, true, try('GET', key)
  end
  return tonumber(v[1]) or false, false, unpack(v, 2)
end`
    : ''
  return `local inst, seq = ARGV[1], tonumber(ARGV[2])
${body.includes('seen(') || body.includes('marked(') ? LUA_SEEN() : ''}${body.includes('text(') || prelude.includes('text(') ? LUA_TEXT : ''}
local failed
local function try(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    if not string.find(r.err, 'WRONGTYPE', 1, true) then error(r) end
    failed = failed or r.err
    return false
  end
  return r
end
${hread}${prelude}
local out, recs, fresh, ttls, writes, plains, touched = {}, {}, {}, {}, {}, {}, {}
local recorded, replayed = false, false
local base, last = tonumber(ARGV[4]), 6 + tonumber(ARGV[6])
local lims = {}
for j = 7, last do lims[j - 6] = tonumber(ARGV[j]) end
local reply = {ARGV[last + 1]}
local k, a, r = 0, last + 1, 1
local same = ARGV[5] == '1'
local cost, lim, now, nowText
if same then
  cost, lim, now, nowText = tonumber(ARGV[a]), tonumber(ARGV[a + 1]) - 6, base, ARGV[4]
  a = a + 2
  reply[1] = ARGV[a]
end
for _ = 1, tonumber(ARGV[3]) do
  local id = ARGV[a]
  if same then
    a = a + 1
  else
    cost, now, lim = tonumber(ARGV[a + 1]), base + tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]) - 6
    a = a + 4
  end
  local n = lims[lim]
  local code = 1
  failed = nil
  if replayed then
    code = 4
  else
${body}
    if code == 3 then replayed = true end
  end
  if failed then
    code = -1
    out[1] = failed
  end
  r = r + 1
  reply[r] = code
  for j = 1, 2 * n do reply[r + j] = out[j] or 0 end
  r = r + 2 * n
  k = k + ${perLimit} * n
end
return reply`
}

/**
 * ARGV of an admit script for `calls`, after the store's instance id and the batch's sequence: the number
 * of calls, the first call's time, whether every call has the same cost, time and limits (a turn of one
 * limiter's requests, the usual batch), the limits of the batch's calls, each list once (its number of
 * limits, then max, windowMs, burst per limit), then either the one cost and where the one list of limits
 * starts, followed by each call's id, or per call its id, cost, time (as a difference from the first
 * call's) and where its limits start. Every number Redis turns from text into a Lua number costs about as
 * much as a command: sent once, it is turned once.
 */
export function batchArgs(instance: string, seq: number, calls: readonly StoreCall[]): Array<string | number> {
  const first = calls[0]!
  const base = first.now
  const limits: Array<number> = []
  // By what the limits are, not by the array: a limiter's calls may each carry an array of their own.
  const at = new Map<string, number>()
  const starts: number[] = []
  let same = true
  for (const call of calls) {
    const l0 = call.limits[0]
    const key = call.limits.length === 1 && l0 !== undefined ? `${l0.max}:${l0.windowMs}:${l0.burst}` : limitsKey(call.limits)
    let start = at.get(key)
    if (start === undefined) {
      start = 7 + limits.length
      at.set(key, start)
      limits.push(call.limits.length)
      for (const l of call.limits) limits.push(l.max, l.windowMs, l.burst)
    }
    starts.push(start)
    if (call.now !== base || call.cost !== first.cost || start !== starts[0]) same = false
  }
  const args: Array<string | number> = [instance, seq, calls.length, base, same ? 1 : 0, limits.length, ...limits]
  if (same) {
    args.push(first.cost, starts[0]!)
    for (const call of calls) args.push(call.id)
  } else {
    for (let i = 0; i < calls.length; i++) args.push(calls[i]!.id, calls[i]!.cost, calls[i]!.now - base, starts[i]!)
  }
  return args
}

function limitsKey(limits: readonly LimitSpec[]): string {
  return limits.map((l) => `${l.max}:${l.windowMs}:${l.burst}`).join(',')
}

/**
 * The write half shared by the hash-keyed algorithms (the counters, GCRA): `writes` holds the `pairs`
 * fields and values limit i's key takes (from 2 × pairs × (i − 1) + 1 on; with several, the last is left
 * out when its value is false), `recs[i]` the record it held, `fresh[i]` whether the key was missing. A hash
 * cannot be created with its TTL, and a script is not rolled back when Redis refuses one of its commands
 * (ACL, maxmemory), so the order is what keeps every key with a TTL:
 * - before anything is written, each key about to be made is checked for PEXPIRE with
 *   redis.acl_check_cmd, which writes nothing; a user who may not run it gets PEXPIRE's own refusal
 *   there. (Before Redis 7, without acl_check_cmd, the PEXPIRE itself runs on the missing key.)
 * - then each HSET with its record, and the PEXPIRE right after it on a key it made. HSET is the first
 *   write, and a Redis at maxmemory refuses it (a denyoom command) before anything is written; once one
 *   write ran, Redis lets the rest of the script write, so no call is half counted.
 * `expire`: when a key's TTL is set after its HSET (`fresh[i]` for the counters, whose TTL never moves;
 * GCRA's says when its TTL must move on). `step`: keys per
 * limit, the first of each written. A key read as a plain string (`plains[i]`, see hread) is counted as
 * one (`count`: the fixed window's transaction path owns it, and has no record) or replaced by the hash
 * (`replace`: a key of an earlier version, which had none). `after`: Lua of the algorithm's own, run for
 * each key after its write.
 */
export function luaHashWrites(expire: string, step: number, plain: 'count' | 'replace', pairs = 1, after = ''): string {
  const key = step === 1 ? 'KEYS[k + i]' : `KEYS[k + ${step} * (i - 1) + 1]`
  const field = (j: number) => `writes[${2 * pairs} * (i - 1) + ${j + 1}]`
  // Field names at even j, numbers at odd j: those are given as text (LUA_TEXT).
  const arg = (j: number) => (j % 2 === 1 ? `text(${field(j)})` : field(j))
  const fields = Array.from({ length: 2 * pairs }, (_, j) => arg(j)).join(', ')
  // With several pairs, the last is written only when its value is not false (a field that rarely moves).
  // The batch's record goes on the first limit's key of the first call it admits only (see "Exactly once").
  const write = (args: string) => `if i == 1 and not recorded then
          redis.call('HSET', ${key}, ${args}, inst, text(marked(recs[i])))
          recorded = true
          touched[${key}] = true
        else
          redis.call('HSET', ${key}, ${args})
        end`
  const hset =
    pairs === 1
      ? write(fields)
      : `if ${field(2 * pairs - 1)} == false then
          ${write(Array.from({ length: 2 * pairs - 2 }, (_, j) => arg(j)).join(', '))}
        else
          ${write(fields)}
        end`
  const made = plain === 'replace' ? '(fresh[i] or plains[i])' : 'fresh[i]'
  const plainWrite =
    plain === 'count'
      ? `redis.call('INCRBY', ${key}, text(cost))`
      : `redis.call('DEL', ${key})
        recs[i] = nil
        ${write(fields)}
        redis.call('PEXPIRE', ${key}, text(ttls[i]))`
  return `
  if code == 1 and cost > 0 and not failed then
    for i = 1, n do
      if ${made} and not (redis.acl_check_cmd and redis.acl_check_cmd('PEXPIRE', ${key}, '1')) then
        redis.call('PEXPIRE', ${key}, text(ttls[i]))
      end
    end
    for i = 1, n do
      if plains[i] then
        ${plainWrite}
      else
        ${hset}
        if ${expire} then redis.call('PEXPIRE', ${key}, text(ttls[i])) end
      end${after}
    end
  end`
}

/**
 * After a hash-keyed algorithm's reads: an earlier run of this batch recorded itself on the call's first
 * key (code 3), which this run has not (`touched`, set by luaHashWrites). It says the call was admitted
 * only when no other call of the batch has that key; the store, which knows, answers it admitted then,
 * and otherwise as a call whose reply was lost (script-replies.ts batchResults).
 */
export const LUA_REPLAYED = `
  if cost > 0 and not failed and not touched[KEYS[k + 1]] and seen(recs[1]) then code = 3 end`
