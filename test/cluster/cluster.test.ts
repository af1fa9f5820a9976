import { createServer, type Server } from 'node:http'
import { RedisStore, rateLimit } from '@tollgate/express'
import express from 'express'
import { Cluster } from 'ioredis'
import { testPrefix } from '../harness/redis'
import { type RedisCluster, startRedisCluster } from '../harness/redis-cluster'
import { storeContract } from '../stores/store-contract'
import { burst, close, listen } from '../support/http'

// A real local Redis Cluster of three masters, made of redis-server processes on free ports.
let cluster: RedisCluster
let client: Cluster

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 })
  client = new Cluster(cluster.startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } })
  await client.ping()
}, 60_000)

afterAll(async () => {
  client?.disconnect()
  await cluster?.stop()
})

storeContract('Redis Cluster', () => ({ store: new RedisStore({ client, timeout: '2s' }), prefix: testPrefix('cluster-contract') }))

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
        store: new RedisStore({ client, timeout: '2s' }),
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
    const store = new RedisStore({ client, timeout: '2s' })
    const t = Date.now()
    const clients = Array.from({ length: 30 }, (_, i) => `198.51.100.${i}`)
    for (const ip of clients) {
      await store.increment(`${prefix}{${ip}}`, 1, 1000, t)
      await store.increment(`${prefix}{${ip}}`, 1, 1000, t + 1000) // the next window: another key
    }
    const slotsOf = async (ip: string) =>
      new Set(await Promise.all([0, 1000].map((dt) => client.cluster('KEYSLOT', `${prefix}{${ip}}:${Math.floor((t + dt) / 1000)}`))))
    for (const ip of clients) expect((await slotsOf(ip)).size).toBe(1)
    const masters = await Promise.all(client.nodes('master').map(async (node) => Number(await node.dbsize())))
    expect(masters.filter((n) => n > 0).length).toBeGreaterThan(1)
  })
})
