import { MemoryStore, RedisStore, type Store } from '@tollgate/core'
import { keysWithoutTtl, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { burst, close, listen } from '../support/http'
import { ADAPTERS, buildWith } from './fetch-apps'

// The race GET-then-INCR loses, in every framework: a concurrent burst from one client admits
// exactly max. The clock is fixed so the burst falls in one window however long it takes.
const db = useRedis({ nodeRedis: true })

const stores: Array<[string, () => Store]> = [
  ...db.stores(() => new MemoryStore()),
  ['Redis through node-redis', () => new RedisStore({ client: db.nodeRedis, timeout: '2s' })],
]

describe.each(stores)('on the %s store', (_name, makeStore) => {
  it.each(ADAPTERS)('%s admits exactly 50 of 500 concurrent requests, and 5 of 10', async (framework) => {
    const now = Date.now()
    for (const [max, n] of [
      [50, 500],
      [5, 10],
    ] as const) {
      const prefix = testPrefix(`burst-${framework}`)
      const server = await buildWith(framework, {
        global: { max, window: '1m', store: makeStore(), prefix, clock: () => now },
        routes: [{ method: 'GET', path: '/' }],
      })
      const url = await listen(server)
      try {
        expect(await burst(url, n)).toEqual({ 200: max, 429: n - max })
      } finally {
        await close(server)
      }
      expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
    }
  })
})
