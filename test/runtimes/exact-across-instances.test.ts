import { Redis } from 'ioredis'
import { keysWithoutTtl, quitClient, scanKeys, testPrefix } from '../harness/redis'
import type { RedisServer } from '../harness/redis-server'
import { startTestServer, testServers } from '../harness/servers'
import { type RestFront, startRestFront } from '../harness/upstash-rest'
import { get } from '../support/http'
import { type Runtime, type RuntimeServer, runtimeVersion, startServer } from './runtimes'

/*
 * Exact across instances of one app: four processes of a runtime share one count, and 1,000 concurrent
 * requests for one key (the client IP, 127.0.0.1) against `max: 100` admit exactly 100, as one process
 * would. Bun and Deno count in a redis-server of this file over TCP (RedisStore on ioredis, inside the
 * runtime); Node counts in the same server over HTTP (UpstashStore, through the Upstash REST front of
 * test/harness/upstash-rest.ts). Counting alone, each instance would admit 100 (400 in all).
 *
 * Every instance runs on one fixed instant in the middle of a window (NOW), so no window edge falls in
 * the burst, and each run has a prefix of its own. Each instance reports its decisions by source: every
 * admission must be the store's (a fallback would admit from a count of its own), and the count Redis
 * holds must be the number of decisions the store made (the fast path counts refusals too).
 */

const INSTANCES = 4
const REQUESTS = 1000
const MAX = 100
// The first server of the matrix, as the run's shared server is (this file starts one of its own).
const SERVER = testServers()[0]!

let redis: RedisServer | undefined
let client: Redis | undefined
let front: RestFront | undefined
const started = new Set<RuntimeServer>()

beforeAll(async () => {
  redis = await startTestServer(SERVER)
  client = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  front = await startRestFront(redis.url)
})

afterAll(async () => {
  await Promise.all([...started].map((server) => server.stop()))
  await front?.close()
  if (client !== undefined) await quitClient(client)
  await redis?.stop()
})

/** The environment of the instances of one run, for `store`. */
function storeEnv(store: 'redis' | 'upstash', prefix: string): Record<string, string> {
  // The middle of a one-minute window.
  const now = (Math.floor(Date.now() / 60_000) + 1) * 60_000 + 30_000
  const common = { MAX: String(MAX), PREFIX: prefix, NOW: String(now) }
  return store === 'redis'
    ? { ...common, STORE: 'redis', REDIS_URL: redis!.url }
    : { ...common, STORE: 'upstash', UPSTASH_URL: front!.url, UPSTASH_TOKEN: front!.token }
}

describe(`on ${SERVER.name}`, () => {
  describe.each([
    [runtimeVersion('bun'), 'bun', 'redis', 'Redis over TCP (RedisStore, ioredis)'],
    [runtimeVersion('deno'), 'deno', 'redis', 'Redis over TCP (RedisStore, ioredis)'],
    [runtimeVersion('node'), 'node', 'upstash', 'Redis over REST (UpstashStore, @upstash/redis)'],
  ] as const)('%s', (_version, runtime: Runtime, store, transport) => {
    it(`admits exactly ${MAX} of ${REQUESTS} concurrent requests for one key over ${INSTANCES} processes on ${transport}`, async () => {
      const prefix = testPrefix(`runtimes-${runtime}`)
      const env = storeEnv(store, prefix)
      const servers: RuntimeServer[] = []
      try {
        const starts = await Promise.allSettled(Array.from({ length: INSTANCES }, () => startServer(runtime, env)))
        for (const start of starts) if (start.status === 'fulfilled') servers.push(start.value)
        for (const server of servers) started.add(server)
        for (const start of starts) if (start.status === 'rejected') throw start.reason
        const replies = await Promise.all(
          Array.from({ length: REQUESTS }, (_, i) => get(`${servers[i % INSTANCES]!.url}/`, { timeoutMs: 30_000 })),
        )
        const statuses: Record<number, number> = {}
        for (const reply of replies) statuses[reply.status] = (statuses[reply.status] ?? 0) + 1
        expect(statuses).toEqual({ 200: MAX, 429: REQUESTS - MAX })
        expect(new Set(replies.filter((r) => r.status === 200).map((r) => r.body))).toEqual(new Set(['127.0.0.1']))

        const decisions: Record<string, number> = {}
        for (const server of servers) {
          const reply = await get(`${server.url}/decisions`)
          for (const [kind, n] of Object.entries(JSON.parse(reply.body) as Record<string, number>))
            decisions[kind] = (decisions[kind] ?? 0) + n
        }
        // "cache": refused without a round trip, the client being over the limit by a count the store returned.
        const { 'store allowed': admitted = 0, 'store refused': refused = 0, 'cache refused': cached = 0, ...others } = decisions
        expect({ admitted, others }).toEqual({ admitted: MAX, others: {} })
        expect(admitted + refused + cached).toBe(REQUESTS)

        const keys = await scanKeys(client!, `${prefix}*`)
        expect(keys).toHaveLength(1)
        expect(Number(await client!.get(keys[0]!))).toBe(admitted + refused)
        expect(await keysWithoutTtl(client!, prefix)).toEqual([])
      } finally {
        await Promise.all(servers.map((server) => server.stop()))
      }
    })
  })
})
