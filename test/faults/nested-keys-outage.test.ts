import { type Decision, Limiter, RedisStore } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { TENANT_MAX, type TenantRequest, USER_MAX } from '../support/nested-keys'
import { clockInOneWindow } from '../support/time'
import { ownRedis } from './support'

// Per-limit keys while Redis is out: the local fallback decides with every limit's key, continuing
// from the counts Redis returned for each (the tenant's count included, whichever user's request last
// saw it), so the tenant is not given a fresh quota by the outage. Then Redis decides again.
const redis = ownRedis()

it('keeps a tenant at 8 across a stall: the fallback continues each key’s count from the store’s last answer', async () => {
  const limiter = new Limiter<TenantRequest>({
    key: (req) => `user:${req.user}`,
    limits: [
      { max: USER_MAX, window: '1m' },
      { max: TENANT_MAX, window: '1m', key: (req) => `tenant:${req.tenant}` },
    ],
    store: new RedisStore({ client: redis.client, timeout: 100 }),
    prefix: testPrefix('nested-outage'),
    clock: clockInOneWindow(60_000),
    logger: redis.logger,
  })
  const check = async (user: string) => (await limiter.check({ user, tenant: 'acme' })) as Decision
  const before: Decision[] = []
  for (let i = 0; i < 3; i++) before.push(await check('ann'), await check('bob'))
  expect(before.map((d) => [d.source, d.allowed])).toEqual(Array(6).fill(['store', true]))

  redis.server.freeze()
  const during: Decision[] = []
  try {
    for (let i = 0; i < 3; i++) during.push(await check('ann'), await check('bob'))
  } finally {
    redis.server.thaw()
  }
  expect(during.every((d) => d.source === 'fallback')).toBe(true)
  // 6 of the tenant's 8 were used before the stall: 2 more, and each refusal names the tenant's key.
  expect(during.filter((d) => d.allowed)).toHaveLength(TENANT_MAX - 6)
  for (const d of during.filter((x) => !x.allowed)) expect(d.limits![1]).toMatchObject({ key: 'tenant:acme', remaining: 0 })
  expect(redis.logs.some((m) => /the store failed/.test(m))).toBe(true)
})
