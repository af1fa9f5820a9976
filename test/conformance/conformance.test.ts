import type { Server } from 'node:http'
import { MemoryStore } from '@tollgate/core'
import { useRedis } from '../harness/use-redis'
import { close, listen } from '../support/http'
import { ADAPTERS, type Adapter, buildWith, expresses } from './fetch-apps'
import { observe } from './observe'
import { type Observation, type Scenario, scenarios } from './scenarios'

// One scenario table, five adapters (Express, Fastify, Koa; @tollgate/web and @tollgate/hono on Node
// through @hono/node-server), two stores. Each adapter's responses must match the scenario's
// expectations and be identical, header for header, to the other adapters'. A scenario written in an
// idiom an adapter does not have (a decorator, a custom refusal handler) runs on those that have it.
const db = useRedis()

const stores = db.stores(() => new MemoryStore())

/** The adapters that can build the scenario's app: its shape does not depend on the setup. */
const adaptersOf = (scenario: Scenario): Adapter[] => {
  const spec = scenario.app({ store: new MemoryStore({ sweepIntervalMs: 0 }), prefix: '', clock: Date.now, logger: console })
  return ADAPTERS.filter((adapter) => expresses(adapter, spec))
}

describe.each(stores)('on the %s store', (_storeName, makeStore) => {
  describe.each(scenarios)('$name', (scenario) => {
    const adapters = adaptersOf(scenario)
    const seen = new Map<Adapter, Observation[]>()

    it.each(adapters)('in %s', async (adapter) => {
      const { observations, logs } = await observe(scenario, makeStore(), adapter, async (spec) => {
        const server: Server = await buildWith(adapter, spec)
        return { url: await listen(server), stop: () => close(server) }
      })
      expect(observations.map((o) => o.status)).toEqual(scenario.statuses)
      scenario.check?.(observations, logs)
      seen.set(adapter, observations)
    })

    it('gives byte-for-byte the same status, headers and body in every adapter', () => {
      expect(seen.size).toBe(adapters.length)
      const [first, ...others] = adapters.map((f) => seen.get(f))
      for (const other of others) expect(other).toEqual(first)
    })
  })
})
