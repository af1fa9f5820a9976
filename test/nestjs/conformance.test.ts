import { join } from 'node:path'
import type { DynamicModule, INestApplication } from '@nestjs/common'
import { MemoryStore } from '@tollgate/core'
import { type AppSpec, build } from '../conformance/apps'
import { observe } from '../conformance/observe'
import { type Observation, scenarios } from '../conformance/scenarios'
import { useRedis } from '../harness/use-redis'
import { close, listen } from '../support/http'
import { compileFixtures } from './compile'

// The shared conformance scenarios (test/conformance/scenarios.ts) against Nest apps on both platforms
// (test/nestjs/fixtures/conformance.ts): the same statuses, headers and bodies as @tollgate/express.

type Platform = 'express' | 'fastify'
/** What the compiled fixtures export (compiled by tsc at run time, so not imported for their types). */
interface Fixtures {
  conformanceModule(spec: AppSpec): DynamicModule
  start(platform: Platform, root: DynamicModule, options: { trustProxy?: boolean }): Promise<{ app: INestApplication; url: string }>
}

let compiled: ReturnType<typeof compileFixtures>
let fixtures: Fixtures
const db = useRedis()
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

const stores = db.stores(() => new MemoryStore())

describe.each(stores)('on the %s store', (_storeName, makeStore) => {
  describe.each(scenarios)('$name', (scenario) => {
    let reference: Observation[] | undefined

    it('in Express (the reference)', async () => {
      const { observations } = await observe(scenario, makeStore(), 'express', async (spec) => {
        const server = await build('express', spec)
        return { url: await listen(server), stop: () => close(server) }
      })
      reference = observations
    })

    it.each<Platform>(['express', 'fastify'])('in Nest on platform-%s, identical to Express', async (platform) => {
      const { observations, logs } = await observe(scenario, makeStore(), `nestjs-${platform}`, async (spec) => {
        const { app, url } = await fixtures.start(platform, fixtures.conformanceModule(spec), { trustProxy: spec.trustProxy })
        return { url, stop: () => app.close() }
      })
      expect(observations.map((o) => o.status)).toEqual(scenario.statuses)
      scenario.check?.(observations, logs)
      expect(observations).toEqual(reference)
    })
  })
})
