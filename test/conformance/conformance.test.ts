import type { Server } from 'node:http'
import { MemoryStore } from '@tollgate/core'
import { useRedis } from '../harness/use-redis'
import { close, listen } from '../support/http'
import { build, FRAMEWORKS, type Framework } from './apps'
import { observe } from './observe'
import { type Observation, scenarios } from './scenarios'

// One scenario table, three frameworks, two stores. Each framework's responses must match the
// scenario's expectations and be identical, header for header, to the other frameworks'.
const db = useRedis()

const stores = db.stores(() => new MemoryStore())

describe.each(stores)('on the %s store', (_storeName, makeStore) => {
  describe.each(scenarios)('$name', (scenario) => {
    const seen = new Map<Framework, Observation[]>()

    it.each(FRAMEWORKS)('in %s', async (framework) => {
      const { observations, logs } = await observe(scenario, makeStore(), framework, async (spec) => {
        const server: Server = await build(framework, spec)
        return { url: await listen(server), stop: () => close(server) }
      })
      expect(observations.map((o) => o.status)).toEqual(scenario.statuses)
      scenario.check?.(observations, logs)
      seen.set(framework, observations)
    })

    it('gives byte-for-byte the same status, headers and body in every framework', () => {
      expect(seen.size).toBe(FRAMEWORKS.length)
      const [first, ...others] = FRAMEWORKS.map((f) => seen.get(f))
      for (const other of others) expect(other).toEqual(first)
    })
  })
})
