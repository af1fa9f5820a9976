import { type Decision, Limiter, MemoryStore, RedisStore } from '@tollgate/core'
import { storeContract } from '@tollgate/core/testing'
import { Redis as IORedis, type Redis } from 'ioredis'
import type { RedisClientType } from 'redis'
import { MAX_BATCH_KEYS } from '../../packages/core/src/stores/redis/batcher'
import { closeNodeRedis, escapeGlob, keysWithoutTtl, newNodeRedisClient, quitClient, scanKeys, testPrefix } from '../harness/redis'
import { serverUrl, testServers } from '../harness/servers'
import { useRedis } from '../harness/use-redis'
import { random } from '../support/random'

const db = useRedis()

storeContract('memory', () => ({ store: new MemoryStore({ sweepIntervalMs: 0 }), prefix: 'm:' }), { sameAsMemory: false })
describe.each(testServers())('on $name', (server) => {
  const url = serverUrl(server)
  let redis: Redis
  let nodeRedisClient: RedisClientType
  beforeAll(async () => {
    redis = new IORedis(url(), { maxRetriesPerRequest: 1, connectTimeout: 2000, disconnectTimeout: 0 })
    await redis.ping()
    nodeRedisClient = await newNodeRedisClient(url())
  })
  afterAll(async () => {
    closeNodeRedis(nodeRedisClient)
    await quitClient(redis)
  })

  storeContract('Redis', () => ({ store: new RedisStore({ client: redis, timeout: '2s' }), prefix: testPrefix('contract') }), {
    redis: () => redis,
  })
  storeContract(
    'Redis, unbatched',
    () => ({ store: new RedisStore({ client: redis, batch: false, timeout: '2s' }), prefix: testPrefix('contract-nobatch') }),
    { redis: () => redis },
  )
  storeContract(
    'Redis through node-redis',
    () => ({ store: new RedisStore({ client: nodeRedisClient, timeout: '2s' }), prefix: testPrefix('contract-node-redis') }),
    { redis: () => redis },
  )
  storeContract(
    'Redis through node-redis, unbatched',
    () => ({
      store: new RedisStore({ client: nodeRedisClient, batch: false, timeout: '2s' }),
      prefix: testPrefix('contract-node-redis-nobatch'),
    }),
    { redis: () => redis },
  )
})

/** The client, recording how many keys (INCRBY + PEXPIRE pairs) each transaction carries. */
function countingMulti(seen: number[]): Redis {
  return new Proxy(db.client, {
    get(target, prop, receiver) {
      if (prop !== 'multi') return Reflect.get(target, prop, receiver)
      return () => {
        const tx = target.multi()
        const exec = tx.exec.bind(tx)
        return Object.assign(tx, {
          exec: () => {
            seen.push((tx.length - 1) / 2) // MULTI is queued too; EXEC is queued by exec()
            return exec()
          },
        })
      }
    },
  })
}

describe('RedisStore keys', () => {
  it('writes <prefix>{<client>}:<window index> with a TTL reaching just past the window end', async () => {
    const prefix = testPrefix('layout')
    const store = new RedisStore({ client: db.client, timeout: '2s' })
    const now = Date.now()
    await store.increment(`${prefix}{203.0.113.7}`, 1, 1000, now)
    const key = `${prefix}{203.0.113.7}:${Math.floor(now / 1000)}`
    expect(await db.client.get(key)).toBe('1')
    const ttl = await db.client.pttl(key)
    expect(ttl).toBeGreaterThan(0)
    expect(ttl).toBeLessThanOrEqual(2000)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })

  it('sends one round trip for the concurrent increments of one event-loop turn', async () => {
    const prefix = testPrefix('batch')
    const seen: number[] = []
    const store = new RedisStore({ client: countingMulti(seen), timeout: '2s' })
    const now = Date.now()
    await Promise.all(Array.from({ length: 300 }, (_, i) => store.increment(`${prefix}{k${i % 30}}`, 1, 60_000, now)))
    // 30 distinct keys merged from 300 increments: one transaction of 30 keys × (INCRBY + PEXPIRE).
    expect(seen).toEqual([30])
  })

  it('splits a turn with more than MAX_BATCH_KEYS keys into full transactions, every request keeping its exact count', async () => {
    const prefix = testPrefix('split')
    const seen: number[] = []
    const store = new RedisStore({ client: countingMulti(seen), timeout: '2s' })
    const now = Date.now()
    // Runs of 4 requests per key (merged into one INCRBY), 100 keys, each key coming back 2 or 3
    // times across the splits; costs 1..3.
    const calls = Array.from({ length: 1000 }, (_, i) => ({ key: `${prefix}{k${Math.floor(i / 4) % 100}}`, cost: 1 + (i % 3) }))
    const counts = await Promise.all(calls.map((c) => store.increment(c.key, c.cost, 60_000, now)))
    expect(seen.every((n) => n <= MAX_BATCH_KEYS)).toBe(true)
    expect(seen.length).toBeGreaterThan(1)
    // 1000 requests merged into 250 INCRBYs, plus one for each run cut by a split (its 64th key flushes).
    const sent = seen.reduce((a, b) => a + b, 0)
    expect(sent).toBeGreaterThanOrEqual(250)
    expect(sent).toBeLessThan(250 + seen.length)
    // Per key, the returned counts are exactly the running totals in call order, and the last one is
    // what Redis holds: no request lost, none counted twice, none given another's position.
    const running = new Map<string, number>()
    calls.forEach((c, i) => {
      const total = (running.get(c.key) ?? 0) + c.cost
      running.set(c.key, total)
      expect({ i, count: counts[i] }).toEqual({ i, count: total })
    })
    const window = Math.floor(now / 60_000)
    for (const [key, total] of running) expect(Number(await db.client.get(`${key}:${window}`))).toBe(total)
  })

  it('counts a key whose window turns within one turn in each window, and keeps them apart', async () => {
    const prefix = testPrefix('turn')
    const seen: number[] = []
    const store = new RedisStore({ client: countingMulti(seen), timeout: '2s' })
    const edge = (Math.floor(Date.now() / 1000) + 1) * 1000
    const key = `${prefix}{k}`
    // One turn: two requests before the edge, two after it, one before again (a clock stepping back),
    // and the same key with another window length, whose window index is different too.
    const counts = await Promise.all([
      store.increment(key, 1, 1000, edge - 2),
      store.increment(key, 2, 1000, edge - 1),
      store.increment(key, 1, 1000, edge),
      store.increment(key, 1, 1000, edge + 1),
      store.increment(key, 1, 1000, edge - 1),
      store.increment(key, 1, 60_000, edge),
    ])
    expect(counts).toEqual([1, 3, 1, 2, 4, 1])
    // The turn's batch goes out at each change of window: [edge − 1], [edge], [edge − 1], then the rest.
    expect(seen).toEqual([1, 1, 1, 1])
    expect(await db.client.get(`${key}:${edge / 1000 - 1}`)).toBe('4')
    expect(await db.client.get(`${key}:${edge / 1000}`)).toBe('2')
    expect(await db.client.get(`${key}:${Math.floor(edge / 60_000)}`)).toBe('1')
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })
})

describe('the over-limit cache', () => {
  // A reference limiter on the memory store sees the same clock and requests; the Redis-backed
  // limiter, with its cache, must make exactly the same decisions, across window edges too.
  it('never refuses a request Redis would allow, across window boundaries', async () => {
    let now = Math.floor(Date.now() / 1000) * 1000 + 10
    const prefix = testPrefix('over-cache')
    const clock = () => now
    const redis = new Limiter({
      max: 3,
      store: new RedisStore({ client: db.client, timeout: '2s' }),
      prefix,
      clock,
      key: (r: { k: string }) => r.k,
    })
    const memory = new Limiter({ max: 3, store: new MemoryStore({ sweepIntervalMs: 0 }), prefix, clock, key: (r: { k: string }) => r.k })
    const next = random(7)
    let cached = 0
    for (let step = 0; step < 400; step++) {
      now += Math.floor(next() * 60) // crosses a 1 s edge every ~30 steps
      const req = { k: `c${Math.floor(next() * 3)}` }
      const [a, b] = await Promise.all([redis.check(req), memory.check(req)])
      expect({ step, allowed: (a as Decision).allowed }).toEqual({ step, allowed: (b as Decision).allowed })
      if ((a as Decision).source === 'cache') cached++
    }
    expect(cached).toBeGreaterThan(20) // the cache really answered
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
    expect((await scanKeys(db.client, `${escapeGlob(prefix)}*`)).length).toBeGreaterThan(0)
  })
})

describe('RedisStore deadline', () => {
  it('does not time out a reply that arrived while this process, not Redis, was stalled', async () => {
    const store = new RedisStore({ client: db.client, timeout: 50, batch: false })
    const prefix = testPrefix('stall')
    const pending = store.increment(`${prefix}{c}`, 1, 60_000, Date.now())
    const until = Date.now() + 150 // block the event loop for 3 × the deadline
    while (Date.now() < until) {}
    await expect(pending).resolves.toBe(1)
  })

  it('still times out when Redis really does not answer', async () => {
    const store = new RedisStore({
      client: {
        multi() {
          const tx = { incrby: () => tx, pexpire: () => tx, exec: () => new Promise<never>(() => {}) }
          return tx
        },
        del: async () => 0,
        get: async () => null,
        set: async () => 'OK',
        defineCommand() {},
      },
      timeout: 30,
    })
    const t = Date.now()
    await expect(store.increment('k', 1, 1000, Date.now())).rejects.toThrow(/did not answer within 30 ms/)
    expect(Date.now() - t).toBeLessThan(500)
  })
})
