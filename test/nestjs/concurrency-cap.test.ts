import { join } from 'node:path'
import type { DynamicModule, INestApplication } from '@nestjs/common'
import { MemoryStore, RedisStore, type Store } from '@tollgate/core'
import type { AppSpec } from '../conformance/apps'
import { gate, inFlightApp, inFlightScenario } from '../conformance/in-flight'
import { keysWithoutTtl } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { compileFixtures } from './compile'

// Algorithm "concurrency" in Nest on both platforms, the scenario the other adapters run
// (test/conformance/in-flight.ts): the guard's completion hook releases each request's slot when its
// response ends or the client cuts it off.

type Platform = 'express' | 'fastify'
interface Fixtures {
  conformanceModule(spec: AppSpec): DynamicModule
  start(platform: Platform, root: DynamicModule, options: { trustProxy?: boolean }): Promise<{ app: INestApplication; url: string }>
}

let compiled: ReturnType<typeof compileFixtures>
let fixtures: Fixtures
const db = useRedis({ nodeRedis: true })
beforeAll(async () => {
  compiled = compileFixtures()
  fixtures = {
    ...(require(join(compiled.dir, 'conformance.js')) as Pick<Fixtures, 'conformanceModule'>),
    ...(require(join(compiled.dir, 'stacked.js')) as Pick<Fixtures, 'start'>),
  }
}, 120_000)
afterAll(() => {
  compiled?.remove()
})

const stores: Array<[string, () => Store]> = [
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis through ioredis', () => new RedisStore({ client: db.client, timeout: '2s' })],
  ['Redis through node-redis', () => new RedisStore({ client: db.nodeRedis, timeout: '2s' })],
]

describe.each(stores)('a concurrency cap on the %s store', (storeName, makeStore) => {
  it.each<Platform>(['express', 'fastify'])(
    'Nest on platform-%s serves 3 of 10 parallel slow requests at once, refuses 7, and frees slots on response end and on a client abort',
    async (platform) => {
      const g = gate()
      const spec = inFlightApp(makeStore(), g)
      const { app, url } = await fixtures.start(platform, fixtures.conformanceModule(spec), {})
      try {
        await inFlightScenario(url, g)
      } finally {
        g.open()
        await app.close()
      }
      if (storeName !== 'memory') expect(await keysWithoutTtl(db.client, spec.global!.prefix!)).toEqual([])
    },
  )
})
