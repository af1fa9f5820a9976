import { MemoryStore, RedisStore, type Store } from '@tollgate/core'
import { keysWithoutTtl } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { close, listen } from '../support/http'
import { build, FRAMEWORKS } from './apps'
import { gate, inFlightApp, inFlightScenario } from './in-flight'

// Algorithm "concurrency" over real HTTP in Express, Fastify and Koa: the slot of each request is
// released when its response ends or the client cuts it off (test/conformance/in-flight.ts).
const db = useRedis({ nodeRedis: true })

const stores: Array<[string, () => Store]> = [
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis through ioredis', () => new RedisStore({ client: db.client, timeout: '2s' })],
  ['Redis through node-redis', () => new RedisStore({ client: db.nodeRedis, timeout: '2s' })],
]

describe.each(stores)('a concurrency cap on the %s store', (storeName, makeStore) => {
  it.each(FRAMEWORKS)(
    '%s serves 3 of 10 parallel slow requests of one client at once, refuses 7 with 429, and frees slots on response end and on a client abort',
    async (framework) => {
      const g = gate()
      const spec = inFlightApp(makeStore(), g)
      const server = await build(framework, spec)
      const url = await listen(server)
      try {
        await inFlightScenario(url, g)
      } finally {
        g.open()
        await close(server)
      }
      if (storeName !== 'memory') expect(await keysWithoutTtl(db.client, spec.global!.prefix!)).toEqual([])
    },
  )
})
