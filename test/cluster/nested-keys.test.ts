import { Limiter, RedisStore, type Store, TollgateError } from '@tollgate/core'
import type { StoreCall } from '@tollgate/core/store'
import { keySlot } from '../../packages/core/src/stores/redis/slots'
import { testPrefix } from '../harness/redis'
import { ALGORITHMS, admitted, burstOfTwoUsers, TENANT_MAX, type TenantRequest, tenantLimiter, USER_MAX } from '../support/nested-keys'
import { useCluster } from './use-cluster'

// Per-limit keys on a real local Redis Cluster of three masters, through an ioredis Cluster and a
// node-redis cluster: one atomic script over the keys of one request needs them in one slot, which
// the hashTag option gives; without it the limiter refuses to start rather than fail at random.
const c = useCluster()

const now = 1_800_000_000_000 + 1000
const minute = Math.floor(now / 60_000)
const byTenant = { hashTag: (req: TenantRequest) => req.tenant }

describe.each(c.clients)('through %s', (_name, storeClient) => {
  it.each(ALGORITHMS)(
    '%s: of 20 concurrent requests of each of two users, each user gets at most 5, the tenant exactly 8, and a refusal counts nowhere',
    async (algorithm) => {
      const limiter = tenantLimiter(new RedisStore({ client: storeClient(), timeout: '2s' }), testPrefix('cluster-nested'), {
        algorithm,
        ...byTenant,
      })
      const errors: unknown[] = []
      limiter.on('storeError', (e) => errors.push(e))
      const { ann, bob } = await burstOfTwoUsers(limiter)
      expect(errors).toEqual([])
      expect([...ann!, ...bob!].every((d) => d.source === 'store')).toBe(true)
      const a = admitted(ann!)
      const b = admitted(bob!)
      expect(a).toBeLessThanOrEqual(USER_MAX)
      expect(b).toBeLessThanOrEqual(USER_MAX)
      expect(a + b).toBe(TENANT_MAX)
      const scope = { keys: [undefined, 'tenant:acme'], hashTag: 'acme' }
      expect((await limiter.peek('user:ann', scope)).limits!.map((d) => d.remaining)).toEqual([USER_MAX - a, 0])
      expect((await limiter.peek('user:bob', scope)).limits!.map((d) => d.remaining)).toEqual([USER_MAX - b, 0])
    },
  )

  it('keeps every key of a tenant in the tag’s slot, named as documented, each with a TTL', async () => {
    const prefix = testPrefix('cluster-nested-keys')
    const limiter = tenantLimiter(new RedisStore({ client: storeClient(), timeout: '2s' }), prefix, byTenant)
    await burstOfTwoUsers(limiter)
    await burstOfTwoUsers(limiter, 'globex')
    const keys = await c.keysUnder(prefix)
    const counters = [...keys].sort()
    expect(counters).toEqual(
      [
        `${prefix}{acme}:tenant:acme:1m.1:${minute}`,
        `${prefix}{acme}:user:ann:1m:${minute}`,
        `${prefix}{acme}:user:bob:1m:${minute}`,
        `${prefix}{globex}:tenant:globex:1m.1:${minute}`,
        `${prefix}{globex}:user:ann:1m:${minute}`,
        `${prefix}{globex}:user:bob:1m:${minute}`,
      ].sort(),
    )
    for (const k of keys) {
      expect(keySlot(k)).toBe(keySlot(k.includes('{acme}') ? '{acme}' : '{globex}'))
      expect(await c.client.pttl(k)).toBeGreaterThan(0)
    }
    expect(Number(await c.client.hget(`${prefix}{acme}:tenant:acme:1m.1:${minute}`, 'n'))).toBe(TENANT_MAX)
  })

  it('refuses per-limit keys without a hashTag at construction, naming the option', () => {
    let error: unknown
    try {
      tenantLimiter(new RedisStore({ client: storeClient(), timeout: '2s' }), testPrefix('cluster-nested-no-tag'))
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(TollgateError)
    expect((error as TollgateError).code).toBe('TG_INVALID_OPTION')
    expect((error as Error).message).toMatch(/Invalid option "hashTag".*the store is a Redis Cluster/)
  })
})

it('names hashTag at the first call across slots when the store cannot tell it is a Cluster', async () => {
  // A store of a third party around the Cluster store, which does not say it is one (Store.cluster).
  const inner = new RedisStore({ client: c.client, timeout: '2s' })
  const opaque: Store = {
    local: false,
    admit: (call: StoreCall) => inner.admit(call),
    refund: (call: StoreCall) => inner.refund(call),
    forget: (call: StoreCall) => inner.forget(call),
  }
  const logged: string[] = []
  const limiter = new Limiter<TenantRequest>({
    key: (req) => `user:${req.user}`,
    limits: [
      { max: USER_MAX, window: '1m' },
      { max: TENANT_MAX, window: '1m', key: (req) => `tenant:${req.tenant}` },
    ],
    store: opaque,
    prefix: testPrefix('cluster-nested-opaque'),
    logger: { warn: (m) => void logged.push(m), error: (m) => void logged.push(m) },
  })
  // A user and a tenant whose keys are in different slots.
  expect(keySlot('{user:ann}')).not.toBe(keySlot('{tenant:acme}'))
  for (let i = 0; i < 2; i++) {
    let error: unknown
    try {
      await limiter.check({ user: 'ann', tenant: 'acme' })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(TollgateError)
    expect((error as Error).message).toMatch(/Invalid option "hashTag".*CROSSSLOT/)
  }
  expect(logged.filter((m) => m.includes('hashTag'))).toHaveLength(1)
})
