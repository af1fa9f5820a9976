import { createServer, type Server } from 'node:http'
import { metrics } from '@opentelemetry/api'
import { Limiter, RedisStore, rateLimit } from '@tollgate/express'
import express from 'express'
import { Redis } from 'ioredis'
import request from 'supertest'
import { testPrefix } from '../harness/redis'
import { type RedisServer, startRedisServer } from '../harness/redis-server'
import { sumWhere, TestMetrics } from '../support/metrics'
import { sleep } from '../support/time'

// Metrics recorded through the global MeterProvider of @opentelemetry/api (an
// SDK MeterProvider with an in-memory exporter), for requests sent over real HTTP through the Express
// adapter to a limiter counting in a real redis-server that this file starts, freezes and thaws.
const quiet = { warn: () => {}, error: () => {} }
const DEADLINE_MS = 50

let redis: RedisServer
let client: Redis
let sdk: TestMetrics
const servers: Server[] = []

beforeAll(async () => {
  sdk = new TestMetrics()
  // Registered before any limiter exists, as the OpenTelemetry docs have apps do.
  metrics.setGlobalMeterProvider(sdk.provider)
  redis = await startRedisServer()
  // disconnectTimeout 0: see test/faults/redis-outage.test.ts (a frozen server must not keep jest alive).
  client = new Redis(redis.url, { disconnectTimeout: 0 })
  client.on('error', () => {})
  await client.ping()
})

afterAll(async () => {
  for (const server of servers) server.close()
  if (redis.running) redis.thaw()
  client.disconnect()
  await redis.stop()
  await sdk.shutdown()
  metrics.disable()
})

function app(options: Parameters<typeof rateLimit>[0]): Server {
  const a = express()
  a.use(rateLimit({ window: '1 minute', store: new RedisStore({ client, timeout: DEADLINE_MS }), logger: quiet, ...options }))
  a.get('/', (req, res) => {
    res.send(req.rateLimit?.source)
  })
  const server = createServer(a)
  servers.push(server)
  return server
}

it('counts 10 allowed and 5 limited decisions of 15 requests against max 10, and times each Redis call', async () => {
  // The 15 requests must fall in one minute window: on the real clock, started in a window's last
  // seconds, they would cross into the next one and be admitted 10 more times. A fixed clock keeps
  // them in one window however long they take.
  const now = Date.now()
  const agent = request(app({ max: 10, prefix: testPrefix('metrics'), clock: () => now }))
  const statuses: number[] = []
  for (let i = 0; i < 15; i++) statuses.push((await agent.get('/')).status)
  expect(statuses.filter((s) => s === 200)).toHaveLength(10)

  const read = await sdk.read()
  const decisions = read.get('tollgate.decisions') ?? []
  const policy = { 'tollgate.policy': '10-per-1m' }
  expect(sumWhere(decisions, { ...policy, 'tollgate.outcome': 'allowed', 'tollgate.source': 'store' })).toBe(10)
  // The 11th went to Redis; the 4 after it were refused from the over-limit cache, with no store call.
  expect(sumWhere(decisions, { ...policy, 'tollgate.outcome': 'limited', 'tollgate.source': 'store' })).toBe(1)
  expect(sumWhere(decisions, { ...policy, 'tollgate.outcome': 'limited', 'tollgate.source': 'cache' })).toBe(4)
  expect(sumWhere(decisions, policy)).toBe(15)
  for (const point of decisions)
    expect(Object.keys(point.attributes).sort()).toEqual(['tollgate.outcome', 'tollgate.policy', 'tollgate.source'])

  const durations = read.get('tollgate.store.duration') ?? []
  expect(sumWhere(durations, { 'tollgate.operation': 'increment', 'tollgate.outcome': 'ok' })).toBe(11)
  expect(sumWhere(durations, {})).toBe(11)

  // Attribute values are bounded: the client key (the IP) is in none of them.
  expect(JSON.stringify([...read.values()])).not.toMatch(/127\.0\.0\.1/)
})

it('counts decisions made while Redis is frozen with source "fallback", the timed-out call, and the degraded node', async () => {
  const prefix = testPrefix('metrics-outage')
  const agent = request(app({ max: 10, name: 'outage', prefix }))
  await agent.get('/').expect(200, 'store')
  expect(await sdk.value('tollgate.store.degraded_nodes', { 'tollgate.prefix': prefix })).toBe(0)

  redis.freeze()
  try {
    for (let i = 0; i < 3; i++) await agent.get('/').expect(200, 'fallback')
    const read = await sdk.read()
    const decisions = read.get('tollgate.decisions') ?? []
    expect(sumWhere(decisions, { 'tollgate.policy': 'outage', 'tollgate.outcome': 'allowed', 'tollgate.source': 'fallback' })).toBe(3)
    // The first call missed its deadline; the next two went straight to the fallback (the circuit is open).
    expect(sumWhere(read.get('tollgate.store.duration') ?? [], { 'tollgate.operation': 'increment', 'tollgate.outcome': 'timeout' })).toBe(
      1,
    )
    expect(sumWhere(read.get('tollgate.store.degraded_nodes') ?? [], { 'tollgate.prefix': prefix })).toBe(1)
  } finally {
    redis.thaw()
  }

  // After the circuit's second the store is asked again, answers, and the node is no longer degraded.
  await sleep(1100)
  await agent.get('/').expect(200, 'store')
  expect(await sdk.value('tollgate.store.degraded_nodes', { 'tollgate.prefix': prefix })).toBe(0)
  expect(await sdk.value('tollgate.decisions', { 'tollgate.policy': 'outage', 'tollgate.source': 'store' })).toBe(2)
})

it('times the grants of a lease and its give-back at close, as operations lease and end_lease', async () => {
  const now = Date.now()
  const timed = async (operation: string) =>
    sumWhere((await sdk.read()).get('tollgate.store.duration') ?? [], { 'tollgate.operation': operation })
  const [leases, ends] = [await timed('lease'), await timed('end_lease')]
  const store = new RedisStore({ client, timeout: '2s' })
  const limiter = new Limiter({
    max: 100,
    window: '1 minute',
    lease: true,
    prefix: testPrefix('metrics-lease'),
    store,
    logger: quiet,
    clock: () => now,
  })
  await sleep(20) // the limiter finds the global MeterProvider (it loads @opentelemetry/api with import())
  for (let i = 0; i < 3; i++) expect((await limiter.consume('a')).allowed).toBe(true)
  await limiter.close()
  expect(await timed('lease')).toBeGreaterThan(leases)
  expect(await timed('end_lease')).toBe(ends + 1)
  const okLeases = sumWhere((await sdk.read()).get('tollgate.store.duration') ?? [], {
    'tollgate.operation': 'lease',
    'tollgate.outcome': 'ok',
  })
  expect(okLeases).toBe(await timed('lease'))
})
