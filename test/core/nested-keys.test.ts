import { type Decision, Limiter, MemoryStore, RedisStore, type Store, TollgateError } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import {
  ALGORITHMS,
  admitted,
  burstOfTwoUsers,
  PER_USER,
  TENANT_MAX,
  type TenantRequest,
  tenantLimiter,
  USER_MAX,
} from '../support/nested-keys'

// Limits with keys of their own (`limits[i].key`): a user's limit within their tenant's, decided
// together in one atomic store call, on the memory store and on Redis through both clients.

const db = useRedis({ nodeRedis: true })
const now = 1_800_000_000_000 + 1000
const minute = Math.floor(now / 60_000)

const stores: Array<[string, () => Store]> = [
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis (ioredis)', () => new RedisStore({ client: db.client, timeout: '2s' })],
  ['Redis (node-redis)', () => new RedisStore({ client: db.nodeRedis, timeout: '2s' })],
]

describe.each(stores)('a user within a tenant on the %s store', (_name, makeStore) => {
  it.each(ALGORITHMS)(
    '%s: of 20 concurrent requests of each of two users, each user gets at most 5, the tenant exactly 8, and a refusal counts nowhere',
    async (algorithm) => {
      const limiter = tenantLimiter(makeStore(), testPrefix('nested'), { algorithm })
      const { ann, bob } = await burstOfTwoUsers(limiter)
      const a = admitted(ann!)
      const b = admitted(bob!)
      expect(a).toBeLessThanOrEqual(USER_MAX)
      expect(b).toBeLessThanOrEqual(USER_MAX)
      expect(a + b).toBe(TENANT_MAX)
      expect(ann!.length + bob!.length).toBe(2 * PER_USER)
      // What each key holds: each user exactly their admissions (a refused request, by the tenant or by
      // the user's own limit, counted in neither key), the tenant their sum.
      const keys = { keys: [undefined, 'tenant:acme'] }
      const annLeft = (await limiter.peek('user:ann', keys)).limits!
      const bobLeft = (await limiter.peek('user:bob', keys)).limits!
      expect(annLeft.map((d) => [d.key, d.remaining])).toEqual([
        ['user:ann', USER_MAX - a],
        ['tenant:acme', 0],
      ])
      expect(bobLeft.map((d) => [d.key, d.remaining])).toEqual([
        ['user:bob', USER_MAX - b],
        ['tenant:acme', 0],
      ])
    },
  )

  it('reports each limit under its own key, the request under its client key, and one header list member per limit', async () => {
    const limiter = tenantLimiter(makeStore(), testPrefix('nested-headers'))
    const first = (await limiter.check({ user: 'ann', tenant: 'acme' })) as Decision
    expect(first.key).toBe('user:ann')
    expect(first.limits!.map((d) => [d.key, d.policy.name, d.remaining])).toEqual([
      ['user:ann', '5-per-1m', 4],
      ['tenant:acme', '8-per-1m', 7],
    ])
    expect(limiter.headers([first])).toMatchObject({
      'RateLimit-Policy': '"5-per-1m";q=5;w=60, "8-per-1m";q=8;w=60',
      RateLimit: '"5-per-1m";r=4;t=59, "8-per-1m";r=7;t=59',
    })
    for (let i = 0; i < 6; i++) await limiter.check({ user: `u${i}`, tenant: 'acme' })
    // Ann has 4 left of her own, the tenant 1: the tenant's limit decides, and its key is the one reported.
    const refusedByTenant = (await limiter.check({ user: 'ann', tenant: 'acme' })) as Decision
    expect(refusedByTenant.allowed).toBe(true)
    const last = (await limiter.check({ user: 'ann', tenant: 'acme' })) as Decision
    expect(last.allowed).toBe(false)
    expect(last.limits!.map((d) => [d.key, d.allowed, d.remaining])).toEqual([
      ['user:ann', false, 3],
      ['tenant:acme', false, 0],
    ])
    expect(last.policy.name).toBe('8-per-1m')
    // Another tenant is untouched.
    expect(((await limiter.check({ user: 'ann', tenant: 'globex' })) as Decision).allowed).toBe(true)
  })

  it('consume, peek and reset take each limit’s key in an options object, and today’s signatures keep working', async () => {
    const limiter = tenantLimiter(makeStore(), testPrefix('nested-api'))
    const tenant = { keys: [undefined, 'tenant:acme'] }
    expect((await limiter.consume('user:ann', { ...tenant, cost: 3 })).limits!.map((d) => d.remaining)).toEqual([2, 5])
    expect((await limiter.peek('user:ann', tenant)).limits!.map((d) => d.remaining)).toEqual([2, 5])
    await expect(async () => limiter.consume('user:ann')).rejects.toThrow(
      /"keys\[1\]": limits\[1\] has a key of its own: pass it as keys\[1\]/,
    )
    await expect(async () => limiter.consume('user:ann', 1)).rejects.toThrow(TollgateError)
    await expect(async () => limiter.peek('user:ann')).rejects.toThrow(/keys\[1\]/)
    await expect(async () => limiter.consume('user:ann', { keys: ['user:x', 'tenant:acme'] })).rejects.toThrow(
      /"keys\[0\]": limits\[0\] has no key of its own/,
    )
    await expect(async () => limiter.consume('user:ann', { ...tenant, hashTag: 'acme' })).rejects.toThrow(
      /"hashTag": this limiter has no hashTag/,
    )

    // reset(key) forgets the limits counted under the key, never the tenant's shared count...
    await limiter.reset('user:ann')
    expect((await limiter.peek('user:ann', tenant)).limits!.map((d) => d.remaining)).toEqual([5, 5])
    // ...which is forgotten when named.
    await limiter.reset('user:ann', tenant)
    expect((await limiter.peek('user:ann', tenant)).limits!.map((d) => d.remaining)).toEqual([5, 8])

    // A limiter without per-limit keys takes the same calls as before, and no keys.
    const plain = new Limiter({ max: 2, window: '1m', store: makeStore(), prefix: testPrefix('nested-plain'), clock: () => now })
    expect((await plain.consume('c', 2)).remaining).toBe(0)
    expect((await plain.peek('c', 2)).remaining).toBe(0)
    await expect(async () => plain.consume('c', { keys: ['x'] })).rejects.toThrow(/"keys": this limiter's limits have no key of their own/)
    expect((await plain.consume('d', { cost: 2 })).remaining).toBe(0)
  })

  it.each(ALGORITHMS)('%s: settles a decision to its actual cost under every key it counted in', async (algorithm) => {
    const limiter = tenantLimiter(makeStore(), testPrefix('nested-settle'), { algorithm })
    const tenant = { keys: [undefined, 'tenant:acme'] }
    const d = await limiter.consume('user:ann', { ...tenant, cost: 4 })
    expect(d.limits!.map((x) => x.remaining)).toEqual([1, 4])
    await limiter.settle(d, 1)
    expect((await limiter.peek('user:ann', tenant)).limits!.map((x) => x.remaining)).toEqual([4, 7])
  })

  it('resets nothing when every limit has a key of its own and none is named', async () => {
    const limiter = new Limiter<TenantRequest>({
      limits: [{ max: 3, window: '1m', key: (req) => `tenant:${req.tenant}` }],
      store: makeStore(),
      prefix: testPrefix('nested-reset-none'),
      clock: () => now,
    })
    await limiter.consume('anyone', { keys: ['tenant:acme'] })
    await limiter.reset('anyone')
    expect((await limiter.peek('anyone', { keys: ['tenant:acme'] })).limits!.map((d) => [d.key, d.remaining])).toEqual([['tenant:acme', 2]])
    await limiter.reset('anyone', { keys: ['tenant:acme'] })
    expect((await limiter.peek('anyone', { keys: ['tenant:acme'] })).limits![0]!.remaining).toBe(3)
  })

  it('refunds an admitted decision in every key it counted in', async () => {
    const limiter = tenantLimiter(makeStore(), testPrefix('nested-refund'))
    const tenant = { keys: [undefined, 'tenant:acme'] }
    const d = await limiter.consume('user:ann', { ...tenant, cost: 2 })
    await limiter.refund(d)
    await limiter.refund(d)
    expect((await limiter.peek('user:ann', tenant)).limits!.map((x) => x.remaining)).toEqual([5, 8])
  })
})

describe('per-limit keys in Redis', () => {
  it.each([
    ['without a hash tag', undefined, (k: string, label: string) => `{${k}}:${label}`],
    ['with a hashTag', (req: TenantRequest) => req.tenant, (k: string, label: string) => `{acme}:${k}:${label}`],
  ])('names its keys as documented, %s, and every key has a TTL', async (_name, hashTag, stem) => {
    const prefix = testPrefix('nested-keys')
    const limiter = tenantLimiter(new RedisStore({ client: db.client, timeout: '2s' }), prefix, hashTag === undefined ? {} : { hashTag })
    await burstOfTwoUsers(limiter)
    const keys = (await db.client.keys(`${prefix}*`)).sort()
    // Only the counters: a call's record of exactly once lives in them (protocol.ts), not in a key of its own.
    const counters = keys
    expect(counters).toEqual(
      [
        `${prefix}${stem('tenant:acme', '1m.1')}:${minute}`,
        `${prefix}${stem('user:ann', '1m')}:${minute}`,
        `${prefix}${stem('user:bob', '1m')}:${minute}`,
      ].sort(),
    )
    const values = await Promise.all(counters.map((k) => db.client.hget(k, 'n')))
    const byKey = Object.fromEntries(counters.map((k, i) => [k.replace(prefix, ''), Number(values[i])]))
    expect(byKey[`${stem('tenant:acme', '1m.1')}:${minute}`]).toBe(TENANT_MAX)
    expect(byKey[`${stem('user:ann', '1m')}:${minute}`]! + byKey[`${stem('user:bob', '1m')}:${minute}`]!).toBe(TENANT_MAX)
    for (const k of keys) expect(await db.client.pttl(k)).toBeGreaterThan(0)
  })
})

describe('per-limit keys: inputs and options', () => {
  const store = () => new MemoryStore({ sweepIntervalMs: 0 })

  it.each([
    [
      'throws',
      () => {
        throw new Error('no tenant')
      },
      /Option "limits\[1\]\.key" threw no tenant/,
    ],
    ['returns an empty string', () => '', /Option "limits\[1\]\.key" returned "" \(string\), expected a non-empty string/],
    ['returns a number', () => 42 as unknown as string, /Option "limits\[1\]\.key" returned 42 \(number\)/],
    ['rejects', () => Promise.reject(new Error('lookup failed')), /Option "limits\[1\]\.key" threw lookup failed/],
    ['resolves to undefined', () => Promise.resolve(undefined as unknown as string), /Option "limits\[1\]\.key" returned undefined/],
  ])('a limit key function that %s fails the request as the key option does, logged once', async (_name, key, message) => {
    const logged: string[] = []
    const limiter = new Limiter<TenantRequest>({
      limits: [
        { max: 5, window: '1m' },
        { max: 8, window: '1m', key },
      ],
      key: (req) => req.user,
      store: store(),
      logger: { warn: (m) => void logged.push(m), error: (m) => void logged.push(m) },
    })
    for (let i = 0; i < 2; i++) {
      let error: unknown
      try {
        await limiter.check({ user: 'ann', tenant: 'acme' })
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(TollgateError)
      expect((error as TollgateError).code).toBe('TG_INVALID_REQUEST_VALUE')
      expect((error as Error).message).toMatch(message)
    }
    expect(logged).toHaveLength(1)
    // Nothing was counted under the user's key either.
    expect((await limiter.peek('ann', { keys: [undefined, 'acme'] })).limits![0]!.remaining).toBe(5)
  })

  it('a hashTag function that throws or returns a bad value fails the request naming hashTag', async () => {
    const limiter = new Limiter<TenantRequest>({
      limits: [{ max: 5, window: '1m', key: (req) => req.user }],
      hashTag: (req) => req.tenant,
      store: store(),
      logger: { warn() {}, error() {} },
    })
    await expect(async () => limiter.check({ user: 'ann', tenant: '' })).rejects.toThrow(/Option "hashTag" returned "" \(string\)/)
    expect(((await limiter.check({ user: 'ann', tenant: 'acme' })) as Decision).limits!.map((d) => d.key)).toEqual(['ann'])
  })

  it.each([
    [
      { limits: [{ max: 1, window: '1m', key: () => 'k' }], blockDuration: '1m' },
      /"blockDuration": expected no blockDuration with limits that have keys of their own/,
    ],
    [{ max: 5, hashTag: () => 't' }, /"hashTag": expected no hashTag unless a limit has a key of its own/],
    [{ limits: [{ max: 1, window: '1m', key: 'tenant' }] }, /"limits\[0\]\.key": expected a function of the request/],
    [
      {
        limits: [
          { max: 1, window: '1m' },
          { max: 2, window: 60_000 },
        ],
      },
      /"limits".*distinct windows.*give one a key of its own/,
    ],
  ])('rejects %p at construction', (options, message) => {
    expect(() => new Limiter(options as never)).toThrow(message)
  })

  it('lets limits of one window count under different keys, each in a key of its own', async () => {
    const limiter = new Limiter<TenantRequest>({
      key: (req) => req.user,
      limits: [
        { max: 2, window: '1m', key: (req) => req.user },
        { max: 3, window: '1m' },
      ],
      store: store(),
      clock: () => now,
    })
    // Both limits count under the same client key, in two counts: neither adds into the other.
    const d = (await limiter.check({ user: 'ann', tenant: 'acme' })) as Decision
    expect(d.limits!.map((x) => [x.key, x.remaining])).toEqual([
      ['ann', 1],
      ['ann', 2],
    ])
  })
})

describe.each(stores)('limiter.wait with limits that have keys of their own, on the %s store', (_name, makeStore) => {
  const make = () =>
    new Limiter<TenantRequest>({
      limits: [
        { max: 5, window: '1h' },
        { max: 2, window: '1h', key: (req) => `tenant:${req.tenant}` },
      ],
      key: (req) => req.user,
      store: makeStore(),
      prefix: testPrefix('nested-wait'),
      clock: () => now,
    })

  it('refuses a wait without the tenant key as consume does, naming keys[1], and counts nothing', async () => {
    const limiter = make()
    const consumed = await Promise.resolve()
      .then(() => limiter.consume('u1'))
      .catch((e: unknown) => e)
    const waited = await limiter.wait('u1', { maxWaitMs: 0 }).catch((e: unknown) => e)
    for (const error of [consumed, waited]) {
      expect(error).toBeInstanceOf(TollgateError)
      expect((error as Error).message).toMatch(/keys\[1\]/)
    }
    expect((await limiter.peek('u1', { keys: [undefined, 'acme'] })).limits!.map((d) => d.remaining)).toEqual([5, 2])
  })

  it("counts the tenant's limit under the tenant key: three users of one tenant, two admitted, and the same policies as consume", async () => {
    const limiter = make()
    const waited: Decision[] = []
    for (const user of ['u1', 'u2', 'u3']) waited.push(await limiter.wait(user, { maxWaitMs: 0, keys: [undefined, 'acme'] }))
    expect(waited.map((d) => d.allowed)).toEqual([true, true, false])
    // The tenant's count is shared; each user's own limit counted once.
    const consumed = (await limiter.consume('u4', { keys: [undefined, 'acme'] })) as Decision
    expect(consumed.allowed).toBe(false)
    expect(waited[2]!.policy).toBe(consumed.policy)
    expect(waited[2]!.limits!.map((d) => d.policy)).toEqual(consumed.limits!.map((d) => d.policy))
    const other = (await limiter.consume('u1', { keys: [undefined, 'globex'] })) as Decision
    expect(other.allowed).toBe(true)
    expect(other.limits!.map((d) => d.remaining)).toEqual([3, 1])
  })

  it('takes hashTag and unknown options as consume does', async () => {
    const limiter = make()
    await expect(limiter.wait('u1', { maxWaitMs: 0, keys: [undefined, 'acme'], hashTag: 'acme' })).rejects.toThrow(/hashTag/)
    await expect(limiter.wait('u1', { maxWaitMs: 0, key: 'x' } as never)).rejects.toThrow(/Unknown wait\(\) option "key"/)
  })
})

describe('limiter.wait reports the policy consume reports', () => {
  it.each([
    ['concurrency', { algorithm: 'concurrency', max: 3 }],
    ['a named fixed window', { max: 3, window: '1h', name: 'api' }],
    ['GCRA', { algorithm: 'gcra', max: 3, window: '1h' }],
  ] as const)('under %s, for an admission, a refusal, and a wait aborted before its first try', async (_name, options) => {
    const limiter = new Limiter({ ...options, store: new MemoryStore({ sweepIntervalMs: 0 }) })
    const consumed = (await limiter.consume('k')) as Decision
    const admitted = await limiter.wait('k', { maxWaitMs: 0 })
    const aborted = await limiter.wait('fresh', { maxWaitMs: 1000, signal: AbortSignal.abort() })
    for (const d of [admitted, aborted]) expect(d.policy).toEqual(consumed.policy)
    expect(aborted.allowed).toBe(false)
  })
})
