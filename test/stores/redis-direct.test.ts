import { tracingChannel } from 'node:diagnostics_channel'
import { RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { MAX_BATCH_KEYS } from '../../packages/core/src/stores/redis/batcher'
import { getFreePort, type RedisServer, startRedisServer } from '../harness/redis-server'

// A standalone ioredis client's fixed-window transactions are written straight onto its connection
// (packages/core/src/stores/redis/direct-writer.ts) instead of through client.multi()'s Pipeline. These
// tests read what reached Redis from its own command statistics, on a private server, so they see
// the wire, not the code that wrote it.

let redis: RedisServer
let client: Redis

beforeAll(async () => {
  redis = await startRedisServer()
  client = new Redis(redis.url)
  client.on('error', () => {}) // the server is killed and restarted in one test below
  await client.ping()
})
afterAll(async () => {
  client.disconnect()
  await redis.stop()
})

/** Calls of each command Redis has run since the last CONFIG RESETSTAT, from INFO commandstats. */
async function commandCalls(): Promise<Record<string, number>> {
  const info = await client.info('commandstats')
  const calls: Record<string, number> = {}
  for (const match of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) calls[match[1]!] = Number(match[2])
  return calls
}

/** What `run` sent to Redis: the calls of MULTI, INCRBY, PEXPIRE and EXEC it caused. */
async function sent(run: () => Promise<unknown>): Promise<{ multi: number; incrby: number; pexpire: number; exec: number }> {
  await client.config('RESETSTAT')
  await run()
  const calls = await commandCalls()
  return { multi: calls.multi ?? 0, incrby: calls.incrby ?? 0, pexpire: calls.pexpire ?? 0, exec: calls.exec ?? 0 }
}

describe('RedisStore on a standalone ioredis client', () => {
  it('sends the increments of one event-loop turn as one MULTI/EXEC, one INCRBY and PEXPIRE per key', async () => {
    const store = new RedisStore({ client, timeout: '2s', transport: 'direct' })
    await store.increment('warm', 1, 60_000, Date.now()) // the store's checks and script loads go first
    const now = Date.now()
    const counts: number[] = []
    const wire = await sent(async () => {
      counts.push(...(await Promise.all(Array.from({ length: 300 }, (_, i) => store.increment(`one-turn{k${i % 30}}`, 1, 60_000, now)))))
    })
    expect(wire).toEqual({ multi: 1, incrby: 30, pexpire: 30, exec: 1 })
    // Each key's ten requests got the positions 1..10, in call order.
    expect(counts.slice(0, 30)).toEqual(Array(30).fill(1))
    expect(counts.slice(270)).toEqual(Array(30).fill(10))
  })

  it(`splits a turn of 200 keys into transactions of at most ${MAX_BATCH_KEYS} keys, each count exact and each key with a TTL`, async () => {
    const store = new RedisStore({ client, timeout: '2s', transport: 'direct' })
    const now = Date.now()
    const keys = Array.from({ length: 200 }, (_, i) => `split{k${i}}`)
    let counts: number[] = []
    const wire = await sent(async () => {
      counts = await Promise.all(keys.map((key, i) => store.increment(key, 1 + (i % 3), 60_000, now)))
    })
    expect(wire).toEqual({ multi: Math.ceil(200 / MAX_BATCH_KEYS), incrby: 200, pexpire: 200, exec: Math.ceil(200 / MAX_BATCH_KEYS) })
    expect(counts).toEqual(keys.map((_, i) => 1 + (i % 3)))
    const window = Math.floor(now / 60_000)
    const ttls = await Promise.all(keys.map((key) => client.pttl(`${key}:${window}`)))
    expect(ttls.filter((ttl) => !(ttl > 0 && ttl <= 61_000))).toEqual([])
  })

  it("writes under the client's keyPrefix, as ioredis's own commands do", async () => {
    const prefixed = new Redis(redis.url, { keyPrefix: 'app1:' })
    try {
      const store = new RedisStore({ client: prefixed, timeout: '2s', transport: 'direct' })
      const now = Date.now()
      expect(await store.increment('pfx{c}', 2, 60_000, now)).toBe(2)
      const key = `app1:pfx{c}:${Math.floor(now / 60_000)}`
      expect(await client.get(key)).toBe('2')
      expect(await client.pttl(key)).toBeGreaterThan(0)
      expect(await client.exists(`pfx{c}:${Math.floor(now / 60_000)}`)).toBe(0)
    } finally {
      prefixed.disconnect()
    }
  })

  it('goes through client.multi() when it is replaced after the store was built', async () => {
    const store = new RedisStore({ client, timeout: '2s', transport: 'direct' })
    const spy = jest.spyOn(client, 'multi')
    try {
      expect(await store.increment('spied{c}', 1, 60_000, Date.now())).toBe(1)
      expect(spy).toHaveBeenCalledTimes(1)
    } finally {
      spy.mockRestore()
    }
    // The spy's transaction was still counted by Redis, in the same window key.
    expect(await store.increment('spied{c}', 1, 60_000, Date.now())).toBe(2)
  })

  it('names the refused command when Redis discards the transaction (EXECABORT), and writes nothing', async () => {
    const user = `direct-${process.pid}`
    await client.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '+@all', '-pexpire')
    const limited = new Redis(redis.url, { username: user, password: 'pw' })
    try {
      const store = new RedisStore({ client: limited, timeout: '2s', transport: 'direct' })
      const now = Date.now()
      await expect(store.increment('refused{c}', 1, 60_000, now)).rejects.toThrow(/NOPERM.*pexpire.*EXECABORT/is)
      expect(await client.exists(`refused{c}:${Math.floor(now / 60_000)}`)).toBe(0)
    } finally {
      limited.disconnect()
      await client.call('ACL', 'DELUSER', user)
    }
  })
})

describe('a transaction cut by a dropped connection', () => {
  it('is sent again whole on the new connection (ioredis resends it), and its count and TTL land there', async () => {
    const resending = new Redis(redis.url, { retryStrategy: () => 20 })
    resending.on('error', () => {}) // the kill below is expected
    try {
      const store = new RedisStore({ client: resending, timeout: '10s', transport: 'direct' })
      const now = Date.now()
      expect(await store.increment('cut{warm}', 1, 60_000, now)).toBe(1)
      redis.freeze() // the next transaction is written to the socket and never answered
      const pending = store.increment('cut{c}', 3, 60_000, now)
      await new Promise((resolve) => setTimeout(resolve, 100))
      await redis.kill('SIGKILL')
      await redis.restart() // empty: only the resent transaction can write the key
      expect(await pending).toBe(3)
      const key = `cut{c}:${Math.floor(now / 60_000)}`
      const fresh = new Redis(redis.url)
      try {
        expect(await fresh.get(key)).toBe('3')
        expect(await fresh.pttl(key)).toBeGreaterThan(0)
      } finally {
        fresh.disconnect()
      }
    } finally {
      resending.disconnect()
    }
  })
})

describe('with a tracer on ioredis batches', () => {
  it("sends each transaction through ioredis's Pipeline, so the tracer still sees it as one batch", async () => {
    const traced = tracingChannel('ioredis:batch')
    const batches: number[] = []
    const handlers = {
      start: (context: object) => void batches.push(Number((context as { batchSize?: unknown }).batchSize)),
      end: () => {},
      asyncStart: () => {},
      asyncEnd: () => {},
      error: () => {},
    }
    traced.subscribe(handlers)
    try {
      const store = new RedisStore({ client, timeout: '2s', transport: 'direct' })
      const now = Date.now()
      await Promise.all([1, 2, 3].map((i) => store.increment(`traced{k${i}}`, 1, 60_000, now)))
      expect(batches).toEqual([6]) // three keys, INCRBY + PEXPIRE each
    } finally {
      traced.unsubscribe(handlers)
    }
    // Unsubscribed: written directly again, which ioredis does not report as a batch.
    await new RedisStore({ client, timeout: '2s', transport: 'direct' }).increment('traced{k4}', 1, 60_000, Date.now())
    expect(batches).toEqual([6])
  })
})

describe('a client that cannot send', () => {
  it("fails the call at once with the client's reason, leaving no promise rejection unhandled", async () => {
    const unhandled: unknown[] = []
    const record = (reason: unknown) => void unhandled.push(reason)
    process.on('unhandledRejection', record)
    const port = await getFreePort() // nothing listens there
    const offline = new Redis({ host: '127.0.0.1', port, enableOfflineQueue: false, lazyConnect: true, retryStrategy: () => null })
    offline.on('error', () => {})
    try {
      const store = new RedisStore({ client: offline, timeout: '2s', transport: 'direct' })
      const t = performance.now()
      await expect(store.increment('offline{c}', 1, 60_000, Date.now())).rejects.toMatchObject({
        code: 'TG_STORE_ERROR',
        message: expect.stringMatching(/enableOfflineQueue/),
      })
      expect(performance.now() - t).toBeLessThan(1000) // not the 2 s deadline: refused, not lost
      await new Promise((resolve) => setTimeout(resolve, 50))
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', record)
      offline.disconnect()
    }
  })
})
