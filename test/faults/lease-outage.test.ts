import { Limiter, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { quitClient, testPrefix } from '../harness/redis'
import type { RedisServer } from '../harness/redis-server'
import { startTestServer, testServers } from '../harness/servers'

// A Redis outage with `lease`: the process keeps deciding from the slice it holds, then from the
// fallback, which in a window the process leased in refuses (the other processes may hold the rest of
// the quota), and in a fresh window admits max / lessees.

let server: RedisServer
let client: Redis

beforeAll(async () => {
  server = await startTestServer(testServers()[0]!)
  client = new Redis(server.url, { disconnectTimeout: 0, maxRetriesPerRequest: 0 })
  client.on('error', () => {})
  await client.ping()
})

afterAll(async () => {
  await quitClient(client)
  await server.stop()
})

const quiet = { warn() {}, error() {} }

it('limits from the held slice during an outage, then refuses from the fallback in the same window', async () => {
  let now = Math.floor(Date.now() / 60_000) * 60_000 + 1000
  const limiter = new Limiter({
    max: 1000,
    window: '1m',
    prefix: testPrefix('lease-outage'),
    lease: true,
    logger: quiet,
    clock: () => now,
    store: new RedisStore({ client, timeout: '100ms' }),
  })
  limiter.on('storeError', () => {})
  // Enough traffic for a slice of several units.
  for (let i = 0; i < 40; i++) {
    await limiter.consume('c')
    now += 5
  }
  await server.freeze()
  try {
    const decisions = []
    for (let i = 0; i < 600; i++) decisions.push(await limiter.consume('c'))
    const fromSlice = decisions.filter((d) => d.allowed && d.source === 'store').length
    const fallback = decisions.filter((d) => d.source === 'fallback')
    expect(fromSlice).toBeGreaterThan(0)
    // Everything after the slice came from the fallback, refused: this window was leased.
    expect(fallback.length).toBe(600 - fromSlice)
    expect(fallback.every((d) => !d.allowed)).toBe(true)
    // The next window, Redis still down: the fallback admits max / lessees (one lessee: max).
    now += 60_000
    const next = []
    for (let i = 0; i < 1005; i++) next.push(await limiter.consume('c'))
    expect(next.filter((d) => d.allowed && d.source === 'fallback')).toHaveLength(1000)
  } finally {
    server.thaw()
  }
  // Redis answers again: the units the fallback admitted go into its count at the next grant.
  now += 10_000
  await new Promise((r) => setTimeout(r, 1100))
  let back = await limiter.consume('c')
  for (let i = 0; i < 20 && back.source !== 'cache'; i++) back = await limiter.consume('c')
  expect(back.allowed).toBe(false)
  const key = `${limiter.config.prefix}{c}:${Math.floor(now / 60_000)}`
  expect(Number(await client.get(key))).toBeGreaterThanOrEqual(1000)
  await limiter.close()
})
