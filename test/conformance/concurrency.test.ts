import { MemoryStore, RedisStore, type Store } from '@tollgate/core'
import type { Redis } from 'ioredis'
import type { RedisClientType } from 'redis'
import { closeNodeRedis, keysWithoutTtl, newNodeRedisClient, newRedisClient, quitClient, testPrefix } from '../harness/redis'
import { burst, close, listen } from '../support/http'
import { build, FRAMEWORKS } from './apps'

// The race GET-then-INCR loses, in every framework: a concurrent burst from one client admits
// exactly max. The clock is fixed so the burst falls in one window however long it takes.
let client: Redis
let nodeRedis: RedisClientType
beforeAll(async () => {
  client = newRedisClient()
  await client.ping()
  nodeRedis = await newNodeRedisClient()
})
afterAll(async () => {
  closeNodeRedis(nodeRedis)
  await quitClient(client)
})

const stores: Array<[string, () => Store]> = [
  ['memory', () => new MemoryStore()],
  ['Redis', () => new RedisStore({ client, timeout: '2s' })],
  ['Redis through node-redis', () => new RedisStore({ client: nodeRedis, timeout: '2s' })],
]

describe.each(stores)('on the %s store', (_name, makeStore) => {
  it.each(FRAMEWORKS)('%s admits exactly 50 of 500 concurrent requests, and 5 of 10', async (framework) => {
    const now = Date.now()
    for (const [max, n] of [
      [50, 500],
      [5, 10],
    ] as const) {
      const prefix = testPrefix(`burst-${framework}`)
      const server = await build(framework, {
        global: { max, window: '1m', store: makeStore(), prefix, clock: () => now },
        routes: [{ method: 'GET', path: '/' }],
      })
      const url = await listen(server)
      try {
        expect(await burst(url, n)).toEqual({ 200: max, 429: n - max })
      } finally {
        await close(server)
      }
      expect(await keysWithoutTtl(client, prefix)).toEqual([])
    }
  })
})
