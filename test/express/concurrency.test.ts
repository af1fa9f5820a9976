import { createServer, type Server } from 'node:http'
import { MemoryStore, RedisStore, rateLimit, type Store } from '@tollgate/express'
import express from 'express'
import { escapeGlob, keysWithoutTtl, scanKeys, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { burst, close, listen } from '../support/http'

// The race the classic GET-then-INCR limiter loses: every request of a concurrent burst reads the
// count before any of them writes it, so all pass. Tollgate decides from the count the atomic
// increment returned. The clock is fixed so the whole burst falls in one window whatever its speed.
const db = useRedis({ nodeRedis: true })

const stores: Array<[string, () => Store]> = [
  ...db.stores(() => new MemoryStore()),
  ['Redis without batching', () => new RedisStore({ client: db.client, batch: false, timeout: '2s' })],
  ['Redis through node-redis', () => new RedisStore({ client: db.nodeRedis, timeout: '2s' })],
  ['Redis through node-redis without batching', () => new RedisStore({ client: db.nodeRedis, batch: false, timeout: '2s' })],
]

describe.each(stores)('concurrent bursts through Express on the %s store', (_name, makeStore) => {
  let server: Server
  let url: string
  const prefix = testPrefix('express-burst')
  afterEach(() => close(server))

  async function start(max: number) {
    const now = Date.now()
    const app = express()
    app.use(rateLimit({ max, window: '1 minute', store: makeStore(), prefix: `${prefix}${max}:`, clock: () => now }))
    app.get('/', (_req, res) => {
      res.send('ok')
    })
    server = createServer(app)
    url = await listen(server)
  }

  it('10 concurrent requests with max 5 give exactly 5 × 200 and 5 × 429', async () => {
    await start(5)
    expect(await burst(url, 10)).toEqual({ 200: 5, 429: 5 })
  })

  it('500 concurrent requests with max 50 give exactly 50 × 200', async () => {
    await start(50)
    expect(await burst(url, 500)).toEqual({ 200: 50, 429: 450 })
  })
})

describe.each([
  ['ioredis', () => db.client],
  ['node-redis', () => db.nodeRedis],
] as const)('keys written to Redis through %s', (_name, storeClient) => {
  it('all carry a TTL after thousands of requests from many clients', async () => {
    const prefix = testPrefix('ttl')
    const app = express()
    app.set('trust proxy', 'loopback')
    // An hour's window: under load the run can take longer than a short window, whose first keys would
    // then expire before the scan below (TTL = the window's end + 1 s).
    app.use(rateLimit({ max: 3, store: new RedisStore({ client: storeClient(), timeout: '2s' }), prefix, window: '1h' }))
    app.get('/', (_req, res) => {
      res.send('ok')
    })
    const server = createServer(app)
    const url = await listen(server)
    let refused = 0
    for (let round = 0; round < 20; round++) {
      const counts = await Promise.all(
        Array.from({ length: 10 }, (_, i) => burst(url, 10, { headers: { 'X-Forwarded-For': `198.51.100.${round * 10 + i}` } })),
      )
      for (const c of counts) refused += c[429] ?? 0
    }
    await close(server)
    // 2000 requests from 200 clients, 10 at once each against max 3: most were refused, so the
    // keys were hit by both the store and the over-limit cache.
    expect(refused).toBeGreaterThan(1000)
    const keys = await scanKeys(db.client, `${escapeGlob(prefix)}*`)
    expect(keys.length).toBeGreaterThanOrEqual(200)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
    for (const key of keys.slice(0, 20)) {
      const ttl = await db.client.pttl(key)
      expect(ttl).toBeGreaterThan(0)
      expect(ttl).toBeLessThanOrEqual(3_600_000 + 1000)
    }
  })
})
