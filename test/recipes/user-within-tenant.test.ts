import { createServer, type Server } from 'node:http'
import { MemoryStore, RedisStore, type Store } from '@tollgate/express'
import type { Request } from 'express'
import { Cluster } from 'ioredis'
import { parseList } from 'structured-headers'
import { testPrefix } from '../harness/redis'
import { type RedisCluster, startRedisCluster } from '../harness/redis-cluster'
import { useRedis } from '../harness/use-redis'
import { close, get, listen } from '../support/http'
import { recipeCode, recipeFile } from './recipe'
import { type Account, runJob, tenantApi } from './user-within-tenant'

// docs/recipes/user-within-tenant.md, run: ./user-within-tenant.ts is the document's code, verbatim (the
// first test checks it), then driven over HTTP on the memory store, a Redis and a Redis Cluster.

it('runs the code of docs/recipes/user-within-tenant.md as written there', () => {
  expect(recipeFile('user-within-tenant')).toBe(recipeCode('user-within-tenant'))
})

const db = useRedis()
let cluster: RedisCluster
let clusterClient: Cluster

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 })
  clusterClient = new Cluster(cluster.startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } })
  await clusterClient.ping()
}, 60_000)

afterAll(async () => {
  clusterClient?.disconnect()
  await cluster?.stop()
})

/** API keys of the test's accounts: two users of Acme, a third of Acme, one of Globex. */
const ACCOUNTS: Record<string, Account> = {
  'key-ann': { user: 'ann', tenant: 'acme' },
  'key-bob': { user: 'bob', tenant: 'acme' },
  'key-cy': { user: 'cy', tenant: 'acme' },
  'key-dee': { user: 'dee', tenant: 'globex' },
}
const authenticate = (req: Request) => ACCOUNTS[req.get('authorization')?.replace(/^Bearer /, '') ?? '']

/** Away from the last seconds of a minute, so one test's requests share a minute window. */
async function awayFromMinuteEdge(): Promise<void> {
  const into = Date.now() % 60_000
  if (into > 55_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - into + 50))
}

describe.each([
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis', () => new RedisStore({ client: db.client, timeout: '2s' })],
  ['Redis Cluster', () => new RedisStore({ client: clusterClient, timeout: '2s' })],
] as const)('the user-within-tenant recipe on the %s store', (_name, makeStore) => {
  let server: Server
  afterEach(() => close(server))

  it('serves a tenant 8 requests a minute, a user at most 5 of them, and charges jobs to the same counts', async () => {
    await awayFromMinuteEdge()
    const store: Store = makeStore()
    const { app, limiter } = tenantApi({ store, authenticate, plan: { perUser: 5, perTenant: 8 }, prefix: testPrefix('recipe-tenant') })
    server = createServer(app)
    const url = await listen(server)
    const as = (key: string) => ({ headers: { authorization: `Bearer ${key}` } })

    expect((await get(`${url}/v1/reports`, as('nobody'))).status).toBe(401)

    const keys = ['key-ann', 'key-bob']
    const replies = await Promise.all(Array.from({ length: 40 }, (_, i) => get(`${url}/v1/reports`, as(keys[i % 2]!))))
    const served = (key: string) => replies.filter((r, i) => keys[i % 2] === key && r.status === 200).length
    expect(served('key-ann') + served('key-bob')).toBe(8)
    expect(served('key-ann')).toBeLessThanOrEqual(5)
    expect(served('key-bob')).toBeLessThanOrEqual(5)
    expect(replies.filter((r) => r.status === 429)).toHaveLength(32)
    expect(replies[0]!.headers['ratelimit-policy']).toBe('"user";q=5;w=60, "tenant";q=8;w=60')

    // A job of a third Acme user finds the tenant's minute used up; a Globex user's job runs.
    let ran = 0
    const work = async () => {
      ran++
    }
    const refused = await runJob(limiter, ACCOUNTS['key-cy']!, work)
    expect(refused.allowed).toBe(false)
    expect(refused.limits!.map((d) => [d.key, d.remaining])).toEqual([
      ['user:cy', 5],
      ['tenant:acme', 0],
    ])
    expect((await runJob(limiter, ACCOUNTS['key-dee']!, work)).allowed).toBe(true)
    expect(ran).toBe(1)
    // Globex's user, one job in: their own 5 and their tenant's 8 each show what is left.
    const dee = await get(`${url}/v1/reports`, as('key-dee'))
    expect(parseList(dee.headers.ratelimit as string).map(([policy, params]) => [policy, params.get('r')])).toEqual([
      ['user', 3],
      ['tenant', 6],
    ])
  })
})
