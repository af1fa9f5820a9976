import { createServer, type Server } from 'node:http'
import { type Decision, Limiter, type LimiterOptions } from '@tollgate/core'
import { storeContract } from '@tollgate/core/testing'
import { RedisStore, rateLimit } from '@tollgate/express'
import express from 'express'
import { Cluster as Cluster6 } from 'ioredis6'
import { createCluster as createCluster6 } from 'redis6'
import { keySlot } from '../../packages/core/src/stores/redis/slots'
import { testPrefix } from '../harness/redis'
import { burst, close, listen } from '../support/http'
import { useCluster } from './use-cluster'

// A real local Redis Cluster of three masters, made of redis-server processes on free ports. Every
// suite runs with the store on each client RedisStore accepts: an ioredis Cluster and a node-redis
// cluster (createCluster); keys and slots are checked through the ioredis one either way.
const c = useCluster()

describe.each(c.clients)('through %s', (_name, storeClient) => {
  storeContract(
    'Redis Cluster',
    () => ({ store: new RedisStore({ client: storeClient(), timeout: '2s' }), prefix: testPrefix('cluster-contract') }),
    { redis: () => c.client },
  )

  it('names the master serving a key as its node (the failure domain of the per-node circuits)', () => {
    const store = new RedisStore({ client: storeClient(), timeout: '2s' })
    const nodes = new Set<string>()
    for (let i = 0; i < 30; i++) {
      const key = `tg:{198.51.100.${i}}:1`
      const node = store.nodeOf(key)
      expect({ key, node }).toEqual({ key, node: c.client.slots[keySlot(key)]![0] })
      nodes.add(node)
    }
    expect(nodes.size).toBe(3)
  })

  describe('Redis Cluster through Express', () => {
    let server: Server
    afterEach(() => close(server))

    it('admits exactly 50 of 500 concurrent requests from one client', async () => {
      const now = Date.now()
      const app = express()
      app.use(
        rateLimit({
          max: 50,
          window: '1 minute',
          store: new RedisStore({ client: storeClient(), timeout: '2s' }),
          // A failing store must not pass for a working one: the memory fallback would also admit 50.
          onStoreError: 'deny',
          prefix: testPrefix('cluster-burst'),
          clock: () => now,
        }),
      )
      app.get('/', (_req, res) => {
        res.send('ok')
      })
      server = createServer(app)
      expect(await burst(await listen(server), 500)).toEqual({ 200: 50, 429: 450 })
    })

    it('spreads clients over the masters while the windows of one client share one slot', async () => {
      const prefix = testPrefix('cluster-slots')
      const store = new RedisStore({ client: storeClient(), timeout: '2s' })
      const t = Date.now()
      const clients = Array.from({ length: 30 }, (_, i) => `198.51.100.${i}`)
      for (const ip of clients) {
        await store.increment(`${prefix}{${ip}}`, 1, 1000, t)
        await store.increment(`${prefix}{${ip}}`, 1, 1000, t + 1000) // the next window: another key
      }
      const slotsOf = async (ip: string) =>
        new Set(await Promise.all([0, 1000].map((dt) => c.client.cluster('KEYSLOT', `${prefix}{${ip}}:${Math.floor((t + dt) / 1000)}`))))
      for (const ip of clients) expect((await slotsOf(ip)).size).toBe(1)
      const masters = await Promise.all(c.client.nodes('master').map(async (node) => Number(await node.dbsize())))
      expect(masters.filter((n) => n > 0).length).toBeGreaterThan(1)
    })
  })

  describe('Redis Cluster runs the Lua script of every algorithm', () => {
    // The store contract above runs every script call by call; these go through the Limiter, with
    // clients spread over the masters (every algorithm but the single-limit fixed window runs a script),
    // each keyed by one client's hash tag, so a script's keys share a slot and run on that slot's
    // master. A CROSSSLOT or MOVED error would show as a store error and a decision from the
    // in-memory fallback, so both are asserted absent.
    const clients = Array.from({ length: 12 }, (_, i) => `client-${i}`)

    /** For each phase, sends `requests` per client (clients in parallel) and counts admissions per client. */
    async function run(options: Partial<LimiterOptions>, phases: Array<{ at: number; requests: number }>) {
      const prefix = testPrefix('cluster-scripts')
      const minute = Math.floor(Date.now() / 60_000) * 60_000 + 60_000
      let now = minute
      const limiter = new Limiter({
        ...options,
        store: new RedisStore({ client: storeClient(), timeout: '2s' }),
        prefix,
        clock: () => now,
      } as LimiterOptions)
      const errors: string[] = []
      limiter.on('storeError', (e: unknown) => errors.push(String(e)))
      const admitted: number[][] = []
      const sources = new Set<string>()
      for (const phase of phases) {
        now = minute + phase.at
        const perClient = await Promise.all(
          clients.map(async (key) => {
            let n = 0
            for (let i = 0; i < phase.requests; i++) {
              const d = (await limiter.consume(key)) as Decision
              sources.add(d.source)
              if (d.allowed) n++
            }
            return n
          }),
        )
        admitted.push([...new Set(perClient)])
      }
      const mastersWithKeys = (await Promise.all(c.client.nodes('master').map((node) => node.keys(`${prefix}*`)))).filter(
        (k) => k.length > 0,
      )
      return { admitted, sources: [...sources], errors, masters: mastersWithKeys.length }
    }

    // [name, options, phases (ms into a minute, requests per client), admitted per client in each phase]
    const cases: Array<[string, Partial<LimiterOptions>, Array<{ at: number; requests: number }>, number[]]> = [
      // 5 per minute at once; 30 s later GCRA has refilled 2 (T = 12 s), the other two nothing.
      [
        'sliding-window',
        { algorithm: 'sliding-window', max: 5, window: '1m' },
        [
          { at: 250, requests: 8 },
          { at: 30_250, requests: 8 },
        ],
        [5, 0],
      ],
      [
        'gcra',
        { algorithm: 'gcra', max: 5, window: '1m' },
        [
          { at: 250, requests: 8 },
          { at: 30_250, requests: 8 },
        ],
        [5, 2],
      ],
      [
        'sliding-log',
        { algorithm: 'sliding-log', max: 5, window: '1m' },
        [
          { at: 250, requests: 8 },
          { at: 30_250, requests: 8 },
        ],
        [5, 0],
      ],
      [
        // 5 in flight, none released: 30 s later all 5 slots are still held.
        'concurrency',
        { algorithm: 'concurrency', max: 5, window: '1m' },
        [
          { at: 250, requests: 8 },
          { at: 30_250, requests: 8 },
        ],
        [5, 0],
      ],
      [
        // 3 per second, then the minute's 5 run out in the second second.
        'fixed-window with two limits',
        {
          limits: [
            { max: 3, window: '1s' },
            { max: 5, window: '1m' },
          ],
        },
        [
          { at: 250, requests: 6 },
          { at: 1250, requests: 6 },
          { at: 2250, requests: 6 },
        ],
        [3, 2, 0],
      ],
      [
        'gcra with two limits',
        {
          algorithm: 'gcra',
          limits: [
            { max: 3, window: '1s' },
            { max: 7, window: '1m', burst: 4 },
          ],
        },
        [
          { at: 250, requests: 6 },
          { at: 1250, requests: 6 },
        ],
        [3, 1],
      ],
    ]

    it.each(cases)(
      '%s: exact counts for clients on several masters, every decision from the store',
      async (_name, options, phases, expected) => {
        const result = await run(options, phases)
        expect(result.errors).toEqual([])
        expect(result.sources).toEqual(['store'])
        // One number per phase: every client was admitted the same, exact, number of times.
        expect(result.admitted).toEqual(expected.map((n) => [n]))
        expect(result.masters).toBeGreaterThan(1)
      },
    )
  })
})

// The contract through the other supported majors of the clients (ioredis 6, node-redis 6; the rest of the
// file runs ioredis 5 and node-redis 5), each pinned in the root package.json under an alias.
describe('through the other client majors', () => {
  let ioredis6: Cluster6 | undefined
  let nodeRedis6: { isOpen: boolean; destroy(): void } | undefined
  beforeAll(async () => {
    ioredis6 = new Cluster6([...c.startupNodes], { redisOptions: { maxRetriesPerRequest: 1 } })
    await ioredis6.ping()
    const cluster = createCluster6({
      rootNodes: c.startupNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
      defaults: { socket: { connectTimeout: 2000 } },
    })
    cluster.on('error', () => {})
    cluster.on('node-error', () => {})
    await cluster.connect()
    nodeRedis6 = cluster as unknown as typeof nodeRedis6
  }, 30_000)
  afterAll(() => {
    ioredis6?.disconnect()
    if (nodeRedis6?.isOpen) nodeRedis6.destroy()
  })

  storeContract(
    'Redis Cluster through ioredis 6',
    () => ({ store: new RedisStore({ client: ioredis6!, timeout: '2s' }), prefix: testPrefix('cluster-contract-ioredis6') }),
    { redis: () => c.client },
  )
  storeContract(
    'Redis Cluster through node-redis 6',
    () => ({ store: new RedisStore({ client: nodeRedis6 as never, timeout: '2s' }), prefix: testPrefix('cluster-contract-node-redis6') }),
    { redis: () => c.client },
  )
})
