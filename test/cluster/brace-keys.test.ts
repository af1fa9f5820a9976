import type { Decision, LimiterOptions } from '@tollgate/core'
import { Cluster } from 'ioredis'
import { escapeGlob, quitClient, scanKeys } from '../harness/redis'
import { type RedisCluster, startRedisCluster } from '../harness/redis-cluster'
import { clusterLimiter } from './support'

// A client key is the Cluster hash tag of its store keys (`<prefix>{<client key>}:...`). A
// custom key starting with "}" or holding "{}" used to end the tag early: the keys of one client fell
// into several slots, and the multi-key scripts (sliding window, several limits) failed with CROSSSLOT
// for them, 35-46% of everyone's decisions then taken by the fallback. Such keys must count exactly,
// in one slot, and affect nobody else.
const MAX = 4

let cluster: RedisCluster
let client: Cluster

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 })
  client = new Cluster(cluster.startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } })
  client.on('error', () => {})
  await client.ping()
}, 60_000)

afterAll(async () => {
  if (client !== undefined) await quitClient(client)
  await cluster?.stop()
})

const BRACED = ['}abc', 'a{b}c', '{}', '{', '}{x}', '%7B']
const PLAIN = ['plain-1', 'plain-2', 'plain-3']

const CASES: Array<[string, Partial<LimiterOptions>]> = [
  ['sliding-window', { algorithm: 'sliding-window', max: MAX, window: '1m' }],
  [
    'fixed-window with two limits',
    {
      limits: [
        { max: MAX, window: '1m' },
        { max: 100, window: '1h' },
      ],
    },
  ],
  [
    'gcra with two limits',
    {
      algorithm: 'gcra',
      limits: [
        { max: MAX, window: '1m' },
        { max: 100, window: '1h' },
      ],
    },
  ],
  ['fixed-window', { max: MAX, window: '1m' }],
  ['gcra', { algorithm: 'gcra', max: MAX, window: '1m' }],
  ['sliding-log', { algorithm: 'sliding-log', max: MAX, window: '1m' }],
]

describe('client keys holding braces on a Cluster', () => {
  it.each(CASES)('%s: each braced key is admitted exactly max times, from the store, in one slot', async (_name, options) => {
    // A generous deadline: this is about where keys go, and a cold first script load (NOSCRIPT, then
    // EVAL, on each master) on a busy machine must not turn into a fallback decision here.
    const { limiter, clock, errors, prefix } = clusterLimiter(client, options, '2s')
    // Mid-minute, so no window edge falls inside the test.
    clock.now = Math.floor(Date.now() / 60_000) * 60_000 + 20_000
    const keys = [...BRACED, ...PLAIN]
    const admitted = await Promise.all(
      keys.map(async (key) => {
        const sources = new Set<string>()
        let n = 0
        // Sequential per client (the decision count is then exact), clients in parallel.
        for (let i = 0; i < MAX + 3; i++) {
          const d = (await limiter.consume(key)) as Decision
          sources.add(d.source)
          if (d.allowed) n++
        }
        return { key, n, sources: [...sources].sort() }
      }),
    )
    expect(errors).toEqual([])
    // "cache": the fixed window's answer for a client already over its max in this window (no round trip).
    expect(admitted.filter((a) => a.n !== MAX || a.sources.some((s) => s !== 'store' && s !== 'cache'))).toEqual([])
    // Every key the limiter wrote hashes to one of |keys| slots, one per client: no client's keys
    // are spread over slots (which is what a broken hash tag does).
    const written = await scanKeys(client, `${escapeGlob(prefix)}*`)
    const slots = new Set(await Promise.all(written.map(async (k) => Number(await client.cluster('KEYSLOT', k)))))
    expect(written.length).toBeGreaterThanOrEqual(keys.length)
    expect(slots.size).toBeLessThanOrEqual(keys.length)
  })
})
