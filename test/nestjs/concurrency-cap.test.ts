import { join } from 'node:path'
import type { DynamicModule, INestApplication } from '@nestjs/common'
import { MemoryStore, RedisStore, type Store } from '@tollgate/core'
import type { AdaptiveConcurrencyOptions, AdaptiveGate } from '@tollgate/core/adapter'
import type { AppSpec } from '../conformance/apps'
import { gate, inFlightApp, inFlightScenario } from '../conformance/in-flight'
import { keysWithoutTtl } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { expectShed, until } from '../support/shed'
import { compileFixtures } from './compile'

// Algorithm "concurrency" in Nest on both platforms, the scenario the other adapters run
// (test/conformance/in-flight.ts): the guard's completion hook releases each request's slot when its
// response ends or the client cuts it off. Then adaptive concurrency, as Nest's middleware.

type Platform = 'express' | 'fastify'
interface Fixtures {
  adaptiveApp(
    platform: Platform,
    options: AdaptiveConcurrencyOptions,
    handle: (name: string) => Promise<void>,
  ): Promise<{ app: INestApplication; url: string; gate: AdaptiveGate }>
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
    ...(require(join(compiled.dir, 'adaptive.js')) as Pick<Fixtures, 'adaptiveApp'>),
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

// adaptiveConcurrency as a Nest middleware (`app.use`), on both platforms: a fixed limit of 1 and a queue of 1,
// handlers that run until the test lets them end. No timing decides anything: the order of events does.
describe.each<Platform>(['express', 'fastify'])('adaptiveConcurrency in Nest on platform-%s', (platform) => {
  it('sheds the waiting sheddable request for a critical one with a 503 and its problem body, then serves the critical one', async () => {
    const waiting = new Map<string, () => void>()
    const handle = (name: string) => new Promise<void>((resolve) => waiting.set(name, resolve))
    const options = { initialLimit: 1, minLimit: 1, maxLimit: 1, maxQueue: 1, queueTimeout: '30s', eventLoopUtilization: false } as const
    const { app, url, gate: adaptive } = await fixtures.adaptiveApp(platform, options, handle)
    try {
      const get = (name: string, priority: string) => fetch(`${url}/${name}`, { headers: { 'x-priority': priority } })
      const first = get('first', 'normal')
      await until(() => waiting.has('first'))
      const sheddable = get('later', 'sheddable')
      await until(() => adaptive.queueLength === 1)
      const critical = get('urgent', 'critical')
      await expectShed(await sheddable)
      expect(waiting.has('urgent')).toBe(false)
      waiting.get('first')!()
      expect((await first).status).toBe(200)
      await until(() => waiting.has('urgent'))
      waiting.get('urgent')!()
      expect(await (await critical).text()).toBe('ok')
      await until(() => adaptive.inflight === 0)
      expect(adaptive.shed).toEqual({ critical: 0, normal: 0, sheddable: 1 })
    } finally {
      for (const release of waiting.values()) release()
      await app.close()
    }
  })
})
