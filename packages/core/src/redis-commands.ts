/** The part of an ioredis transaction (`client.multi()`) the fixed window uses. */
export interface RedisTransactionLike {
  incrby(key: string, increment: string): RedisTransactionLike
  pexpire(key: string, milliseconds: string): RedisTransactionLike
  exec(): Promise<Array<[Error | null, unknown]> | null>
}

/**
 * Every command list Tollgate sends to Redis, in one place.
 *
 * FIXED_WINDOW: one transaction per window key, `MULTI; INCRBY key cost; PEXPIRE key ttl; EXEC`.
 *   KEYS[1] = `<prefix>{<client key>}:<window index>`; the braces are a Cluster hash tag, so every
 *             window of one client lands in one slot.
 *   ARGV    = cost (INCRBY), ttl in ms (PEXPIRE): the time left in the window plus TTL_MARGIN_MS.
 *   Replies = [count after the increment, 1].
 *   The count INCRBY returns is the decision's input: the read and the write are one atomic step,
 *   so a concurrent burst cannot slip past the limit the way GET-then-INCR lets it. PEXPIRE runs in
 *   the same transaction, so no key ever exists without a TTL, even if the client dies mid-request.
 *   Re-arming the TTL on every hit cannot stretch the window: the window is in the key's name.
 *   When requests for one key arrive in the same event-loop turn, their costs are merged into one
 *   INCRBY and each request is given its own position inside the returned total.
 */
export function addFixedWindow(tx: RedisTransactionLike, key: string, cost: number, ttlMs: number): void {
  // Arguments as strings: ioredis spends ~2 µs more per key converting numbers itself. The chained
  // calls, not multi([[...], ...]): no command arrays to build and slice, ~4% more decisions per
  // second in bench/store-bench.mjs.
  tx.incrby(key, String(cost)).pexpire(key, String(ttlMs))
}
/** Replies per key in FIXED_WINDOW; the INCRBY reply is the first. */
export const FIXED_WINDOW_REPLIES = 2

/**
 * How far past the window's end a key lives. Processes decide the window from their own clocks;
 * the margin keeps a key alive for a process whose clock lags by up to this much, while a key
 * still never outlives its window by more than this.
 */
export const TTL_MARGIN_MS = 1000

/*
 * The scripts below serve every algorithm besides the single-limit fixed window, and several limits
 * at once. They share one calling convention (see algorithms.ts, keysOf and argsOf):
 *   KEYS  = the keys of each limit, in limit order (sliding-window: current then previous window key)
 *   ARGV  = cost, now (epoch ms from the limiter's clock), call id, then max, windowMs, burst per limit
 *   Reply = { allowed (1/0), then two numbers per limit } as documented on ConsumeResult
 * Each script first checks every limit, then updates all of them or none: a request refused by one
 * limit uses up no other. Each runs atomically in Redis, so this is one round trip and no race.
 * Every key a script writes gets a TTL in the same script. memory-store.ts mirrors each line.
 */
const HEAD = `
local cost = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local out = {0}
local ok = 1
`

/** Fixed window, several limits: GET each count; if all fit, INCRBY and PEXPIRE each. */
export const FIXED_WINDOW_SCRIPT = `${HEAD}
for i = 1, #KEYS do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  out[2 * i] = c
  out[2 * i + 1] = c
  if c + cost > tonumber(ARGV[3 * i + 1]) then ok = 0 end
end
if ok == 1 then
  for i = 1, #KEYS do
    local w = tonumber(ARGV[3 * i + 2])
    out[2 * i + 1] = redis.call('INCRBY', KEYS[i], cost)
    redis.call('PEXPIRE', KEYS[i], (math.floor(now / w) + 1) * w - now + ${TTL_MARGIN_MS})
  end
end
out[1] = ok
return out`

/**
 * Sliding-window counter (Cloudflare): prev × (W − e)/W + cur must stay ≤ max, compared in integers.
 * The current window's key lives until the end of the next window, where it is the previous one.
 */
export const SLIDING_WINDOW_SCRIPT = `${HEAD}
for i = 1, #KEYS / 2 do
  local max = tonumber(ARGV[3 * i + 1])
  local w = tonumber(ARGV[3 * i + 2])
  local e = now - math.floor(now / w) * w
  local cur = tonumber(redis.call('GET', KEYS[2 * i - 1]) or '0')
  local prev = tonumber(redis.call('GET', KEYS[2 * i]) or '0')
  out[2 * i] = prev
  out[2 * i + 1] = cur
  if prev * (w - e) + (cur + cost) * w > max * w then ok = 0 end
end
if ok == 1 then
  for i = 1, #KEYS / 2 do
    local w = tonumber(ARGV[3 * i + 2])
    redis.call('INCRBY', KEYS[2 * i - 1], cost)
    redis.call('PEXPIRE', KEYS[2 * i - 1], (math.floor(now / w) + 2) * w - now + ${TTL_MARGIN_MS})
  end
end
out[1] = ok
return out`

/**
 * GCRA: one theoretical arrival time (TAT) per key, stored exactly as "<ms>:<rem>", meaning
 * ms + rem / max epoch ms with 0 ≤ rem < max. The emission interval T = W / max is rarely a whole
 * number of ms (1000 / 3), and rounding the TAT to a whole ms at each request lost a unit of burst
 * (3 per second admitted 2 at once) and slowed the steady rate; kept as a remainder, it never rounds.
 * A request fits when its new TAT minus burst × T is not after now, compared multiplied by max, in
 * integers. A value without ":" is a TAT from before the remainder was kept (rem 0).
 * The reply gives both TATs as ms, as 17-digit strings: Redis would truncate a Lua number to an
 * integer. The key expires when the bucket would be full again, so an idle client leaves nothing.
 */
export const GCRA_SCRIPT = `${HEAD}
local tats = {}
for i = 1, #KEYS do
  local max = tonumber(ARGV[3 * i + 1])
  local w = tonumber(ARGV[3 * i + 2])
  local burst = tonumber(ARGV[3 * i + 3])
  local ms, rem = now, 0
  local stored = redis.call('GET', KEYS[i])
  if stored then
    local m, r = string.match(stored, '^(-?%d+):(%d+)$')
    local sm, sr = tonumber(m or stored), tonumber(r or '0')
    if sm and (sm > now or (sm == now and sr > 0)) then ms, rem = sm, sr end
  end
  local before = ms
  if max > 0 then
    before = ms + rem / max
    local sum = rem + cost * w
    local carry = math.floor(sum / max)
    ms = ms + carry
    rem = sum - carry * max
    if (ms - now) * max + rem > burst * w then ok = 0 end
  else
    ok = 0
  end
  local after = ms
  if max > 0 then after = ms + rem / max end
  out[2 * i] = string.format('%.17g', before)
  out[2 * i + 1] = string.format('%.17g', after)
  tats[i] = {ms, rem}
end
if ok == 1 then
  for i = 1, #KEYS do
    local ms, rem = tats[i][1], tats[i][2]
    local ttl = ms - now + ${TTL_MARGIN_MS}
    if rem > 0 then ttl = ttl + 1 end
    redis.call('SET', KEYS[i], string.format('%d:%d', ms, rem), 'PX', ttl)
  end
end
out[1] = ok
return out`

/**
 * Sliding log: a sorted set of admitted units scored by time. Entries at or before now − W leave;
 * the reply names the entry whose expiry makes room, for an exact Retry-After.
 */
export const SLIDING_LOG_SCRIPT = `${HEAD}
for i = 1, #KEYS do
  local max = tonumber(ARGV[3 * i + 1])
  local w = tonumber(ARGV[3 * i + 2])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - w)
  local c = redis.call('ZCARD', KEYS[i])
  local idx = c + cost - max - 1
  if idx < 0 then idx = 0 end
  local s = now
  local r = redis.call('ZRANGE', KEYS[i], idx, idx, 'WITHSCORES')
  if r[2] then s = tonumber(r[2]) end
  out[2 * i] = c
  out[2 * i + 1] = s
  if c + cost > max then ok = 0 end
end
if ok == 1 then
  for i = 1, #KEYS do
    for j = 1, cost do
      redis.call('ZADD', KEYS[i], now, ARGV[3] .. ':' .. j)
    end
    redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[3 * i + 2]) + ${TTL_MARGIN_MS})
  end
end
out[1] = ok
return out`

/**
 * Refund of an admitted request (skipFailedRequests / skipSuccessfulRequests). Same KEYS and ARGV as
 * the consume call it undoes, with the algorithm name prepended to ARGV. Counters only go down
 * within the keys of the request's own window (a later window has other keys), never below zero;
 * TTLs are kept (KEEPTTL / DECRBY leaves them).
 */
export const REFUND_SCRIPT = `
local algorithm = ARGV[1]
local cost = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local step = 1
if algorithm == 'sliding-window' then step = 2 end
for i = 1, #KEYS / step do
  local key = KEYS[(i - 1) * step + 1]
  if algorithm == 'sliding-log' then
    for j = 1, cost do redis.call('ZREM', key, ARGV[4] .. ':' .. j) end
  elseif algorithm == 'gcra' then
    -- Back by cost × T, exactly, in the "<ms>:<rem>" form of GCRA_SCRIPT.
    local max = tonumber(ARGV[3 * i + 2])
    local stored = redis.call('GET', key)
    if stored and max > 0 then
      local m, r = string.match(stored, '^(-?%d+):(%d+)$')
      local ms, rem = tonumber(m or stored), tonumber(r or '0')
      if ms then
        local sum = rem - cost * tonumber(ARGV[3 * i + 3])
        local carry = math.floor(sum / max)
        ms = ms + carry
        rem = sum - carry * max
        if ms > now or (ms == now and rem > 0) then
          redis.call('SET', key, string.format('%d:%d', ms, rem), 'KEEPTTL')
        else
          redis.call('DEL', key)
        end
      end
    end
  else
    local c = tonumber(redis.call('GET', key))
    if c and c > 0 then redis.call('DECRBY', key, math.min(c, cost)) end
  end
end
return 1`

/** Script names as defined on the caller's client with ioredis defineCommand (EVALSHA, EVAL on NOSCRIPT). */
export const SCRIPTS = {
  tollgateFixedWindow: FIXED_WINDOW_SCRIPT,
  tollgateSlidingWindow: SLIDING_WINDOW_SCRIPT,
  tollgateGcra: GCRA_SCRIPT,
  tollgateSlidingLog: SLIDING_LOG_SCRIPT,
  tollgateRefund: REFUND_SCRIPT,
} as const
