import type { Server } from 'node:http'
import { type Logger, MemoryStore, RedisStore, type Store } from '@tollgate/core'
import type { Redis } from 'ioredis'
import { newRedisClient, quitClient, testPrefix } from '../harness/redis'
import { close, get, listen } from '../support/http'
import { build, FRAMEWORKS, type Framework } from './apps'
import { type Observation, scenarios } from './scenarios'

// One scenario table, three frameworks, two stores. Each framework's responses must match the
// scenario's expectations and be identical, header for header, to the other frameworks'.
let client: Redis
beforeAll(async () => {
  client = newRedisClient()
  await client.ping()
})
afterAll(() => quitClient(client))

const stores: Array<[string, () => Store]> = [
  ['memory', () => new MemoryStore()],
  ['Redis', () => new RedisStore({ client, timeout: '2s' })],
]

describe.each(stores)('on the %s store', (_storeName, makeStore) => {
  describe.each(scenarios)('$name', (scenario) => {
    const seen = new Map<Framework, Observation[]>()

    it.each(FRAMEWORKS)('in %s', async (framework) => {
      // 250 ms into a minute, so the seconds left are the same in every run.
      let now = Math.floor(Date.now() / 60_000) * 60_000 + 60_250
      const logs: string[] = []
      const logger: Logger = { warn: (m) => void logs.push(m), error: (m) => void logs.push(m) }
      const spec = scenario.app({ store: makeStore(), prefix: testPrefix(`conformance-${framework}`), clock: () => now, logger })
      const server: Server = await build(framework, spec)
      const url = await listen(server)
      const observations: Observation[] = []
      try {
        for (const step of scenario.steps) {
          now += step.advance ?? 0
          const r = await get(`${url}${step.path ?? '/'}`, { method: step.method ?? 'GET', headers: step.headers })
          const refused = r.status !== 200
          const h = (name: string) => r.headers[name] as string | undefined
          observations.push(
            Object.fromEntries(
              Object.entries({
                status: r.status,
                ratelimit: h('ratelimit'),
                policy: h('ratelimit-policy'),
                retryAfter: h('retry-after'),
                cacheControl: refused ? h('cache-control') : undefined,
                contentType: refused ? h('content-type') : undefined,
                body: refused ? r.body : undefined,
              }).filter(([, v]) => v !== undefined),
            ) as unknown as Observation,
          )
        }
      } finally {
        await close(server)
      }
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
