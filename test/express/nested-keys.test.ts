import { createServer, type Server } from 'node:http'
import { MemoryStore, RedisStore, rateLimit, type Store } from '@tollgate/express'
import express from 'express'
import { parseList } from 'structured-headers'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { close, get, listen, type Reply } from '../support/http'
import { PER_USER, TENANT_MAX, USER_MAX } from '../support/nested-keys'

// A user's limit within their tenant's over real HTTP: the user and tenant come from request headers
// (an app would read them from its authentication), each limit has its own key, and the decision is one
// atomic store call.

const db = useRedis()
const now = 1_800_000_000_000 + 1000
const minute = Math.floor(now / 60_000)

function tenantApp(store: Store, prefix: string): express.Express {
  const app = express()
  app.use(
    rateLimit({
      key: (req) => `user:${req.get('x-user')}`,
      limits: [
        { max: USER_MAX, window: '1m' },
        { max: TENANT_MAX, window: '1m', key: (req) => `tenant:${req.get('x-tenant')}` },
      ],
      store,
      prefix,
      clock: () => now,
      logger: { warn() {}, error() {} },
    }),
  )
  app.get('/', (_req, res) => {
    res.send('ok')
  })
  return app
}

describe.each([
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis', () => new RedisStore({ client: db.client, timeout: '2s' })],
] as const)('Express, a user within a tenant, on the %s store', (name, makeStore) => {
  let server: Server
  afterEach(() => close(server))

  it('serves 8 of 40 concurrent requests of two users of one tenant, at most 5 of each, and answers the rest 429', async () => {
    const prefix = testPrefix('express-nested')
    server = createServer(tenantApp(makeStore(), prefix))
    const url = await listen(server)
    const users = ['ann', 'bob']
    const replies = await Promise.all(
      Array.from({ length: PER_USER * 2 }, (_, i) => get(url, { headers: { 'x-user': users[i % 2]!, 'x-tenant': 'acme' } })),
    )
    const served = (user: string) => replies.filter((r, i) => users[i % 2] === user && r.status === 200).length
    expect(replies.filter((r) => r.status === 200)).toHaveLength(TENANT_MAX)
    expect(replies.filter((r) => r.status === 429)).toHaveLength(2 * PER_USER - TENANT_MAX)
    expect(served('ann')).toBeLessThanOrEqual(USER_MAX)
    expect(served('bob')).toBeLessThanOrEqual(USER_MAX)

    // Each response names both limits, each with what its own key has left.
    const refused = replies.find((r) => r.status === 429) as Reply
    expect(refused.headers['ratelimit-policy']).toBe('"5-per-1m";q=5;w=60, "8-per-1m";q=8;w=60')
    expect(parseList(refused.headers.ratelimit as string).map(([policy, params]) => [policy, params.get('r')])).toEqual([
      ['5-per-1m', expect.any(Number)],
      ['8-per-1m', 0],
    ])
    expect(refused.headers['retry-after']).toBe('59')

    if (name === 'Redis') {
      // The counts behind it: the tenant 8, the users their admissions (a refused request counted nowhere).
      const count = async (key: string) => Number(await db.client.hget(`${prefix}${key}:${minute}`, 'n'))
      expect(await count('{tenant:acme}:1m.1')).toBe(TENANT_MAX)
      expect(await count('{user:ann}:1m')).toBe(served('ann'))
      expect(await count('{user:bob}:1m')).toBe(served('bob'))
      const keys = await db.client.keys(`${prefix}*`)
      for (const k of keys) expect(await db.client.pttl(k)).toBeGreaterThan(0)
    }

    // A user of another tenant is served, if that user has quota left: the tenant's limit is the tenant's own.
    const user = served('ann') < USER_MAX ? 'ann' : 'bob'
    expect((await get(url, { headers: { 'x-user': user, 'x-tenant': 'globex' } })).status).toBe(200)
  })
})
