import { Limiter, MemoryStore, RedisStore, type Store, TollgateError } from '@tollgate/core'
import { escapeGlob, keysWithoutTtl, scanKeys, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// The `lease` option at construction: what it accepts, what it refuses by name, and that it changes
// nothing on a store in this process.

const db = useRedis()
const redis = () => new RedisStore({ client: db.client })

describe('lease is validated at construction', () => {
  it.each([
    [1, /Invalid option "lease": expected true, false or \{ maxShare \}, got 1 \(number\)/],
    ['yes', /"lease".*"yes" \(string\)/],
    [{ maxShare: 0 }, /"lease\.maxShare": expected a number in \(0, 1\], got 0/],
    [{ maxShare: 1.5 }, /"lease\.maxShare".*1\.5/],
    [{ maxShare: '0.5' }, /"lease\.maxShare".*"0\.5" \(string\)/],
    [{ share: 0.5 }, /"lease".*no "share"/],
  ])('refuses lease %p', (lease, message) => {
    expect(() => new Limiter({ lease: lease as never, store: redis() })).toThrow(message)
  })

  it.each(['sliding-window', 'sliding-log', 'concurrency'] as const)('refuses lease with algorithm "%s", naming both', (algorithm) => {
    const build = () => new Limiter({ lease: true, algorithm, store: redis() })
    expect(build).toThrow(TollgateError)
    expect(build).toThrow(new RegExp(`"lease".*algorithm "${algorithm}"`))
  })

  it.each([
    ['limits', { limits: [{ max: 5, window: '1s' }] }, /"lease": not with "limits"/],
    ['a window function', { window: () => '1s' }, /"lease": not with a "window" function/],
    ['actualCost', { actualCost: () => 1 }, /"lease": not with "actualCost"/],
    ['skipFailedRequests', { skipFailedRequests: true }, /"lease": not with "skipFailedRequests"/],
    ['skipSuccessfulRequests', { skipSuccessfulRequests: true }, /"lease": not with "skipSuccessfulRequests"/],
  ])('refuses lease with %s, saying why', (_name, options, message) => {
    expect(() => new Limiter({ lease: true, store: redis(), ...(options as object) })).toThrow(message)
  })

  it('refuses a remote store without lease() and endLease()', () => {
    const store: Store = { local: false, admit: () => ({ allowed: true, values: [0, 1] }), refund: () => {}, forget: () => {} }
    expect(() => new Limiter({ lease: true, store })).toThrow(/"lease": not with this store: it has no lease\(\) and endLease\(\)/)
  })

  it('accepts true, false and { maxShare } with the fixed window and GCRA, and never mutates the options', () => {
    const options = { lease: { maxShare: 0.25 }, store: redis() }
    expect(new Limiter(options).config.lease).toEqual({ maxShare: 0.25 })
    expect(options.lease).toEqual({ maxShare: 0.25 })
    expect(new Limiter({ lease: true, store: redis() }).config.lease).toEqual({ maxShare: 0.5 })
    expect(new Limiter({ lease: true, algorithm: 'gcra', store: redis() }).config.lease).toEqual({ maxShare: 0.5 })
    expect(new Limiter({ lease: false, store: redis() }).config.lease).toBeUndefined()
  })
})

describe('lease on the memory store', () => {
  it('is a no-op: the same decisions as without it, one by one', async () => {
    let now = 1_700_000_000_000
    const clock = () => now
    const leased = new Limiter({ max: 5, window: '1s', lease: true, clock, store: new MemoryStore() })
    const plain = new Limiter({ max: 5, window: '1s', clock, store: new MemoryStore() })
    expect(leased.config.lease).toBeUndefined()
    for (let i = 0; i < 12; i++) {
      if (i === 7) now += 1000
      const a = leased.consume('c')
      const b = plain.consume('c')
      expect(a).toEqual(b)
    }
    await leased.close()
  })
})

describe('lease on Redis, one process', () => {
  it.each(['fixed-window', 'gcra'] as const)(
    '%s: refuses refund and settle of a decision, naming lease, and moves nothing',
    async (algorithm) => {
      const limiter = new Limiter({ max: 3, window: '1m', algorithm, lease: true, store: redis(), prefix: testPrefix('lease-refund') })
      const decision = await limiter.consume('k')
      expect(decision.allowed).toBe(true)
      const before = (await limiter.peek('k')).remaining
      for (const call of [() => limiter.refund(decision), () => limiter.settle(decision, 0)]) {
        const error = await call().catch((e: unknown) => e)
        expect(error).toBeInstanceOf(TollgateError)
        expect((error as Error).message).toMatch(/not with the "lease" option/)
      }
      expect((await limiter.peek('k')).remaining).toBe(before)
      await limiter.close()
    },
  )

  it('admits exactly max of 500 concurrent requests, decided from slices, and Redis counts every grant', async () => {
    const prefix = testPrefix('lease-core')
    const limiter = new Limiter({ max: 200, window: '1m', prefix, lease: true, store: redis() })
    const decisions = await Promise.all(Array.from({ length: 500 }, () => limiter.consume('c')))
    expect(decisions.filter((d) => d.allowed)).toHaveLength(200)
    const [key] = await scanKeys(db.client, `${escapeGlob(prefix)}{c}:[0-9]*`).then((keys) => keys.filter((k) => /\}:\d+$/.test(k)))
    expect(Number(await db.client.get(key!))).toBe(200)
    // Refused ones come from the over-limit knowledge, without a round trip.
    expect((await limiter.consume('c')).source).toBe('cache')
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
    await limiter.close()
  })

  it('reports remaining as its slice plus what Redis had left, and gives unspent units back on close', async () => {
    const prefix = testPrefix('lease-core')
    const limiter = new Limiter({ max: 1000, window: '1m', prefix, lease: true, store: redis() })
    for (let i = 0; i < 50; i++) await limiter.consume('c')
    const d = await limiter.consume('c')
    expect(d.allowed).toBe(true)
    expect(d.remaining).toBe(1000 - 51)
    const key = (await scanKeys(db.client, `${escapeGlob(prefix)}*`)).find((k) => /\}:\d+$/.test(k))!
    expect(Number(await db.client.get(key))).toBeGreaterThan(51)
    await limiter.close()
    expect(Number(await db.client.get(key))).toBe(51)
  })

  it('gives an idle key its unspent units back on its own', async () => {
    const prefix = testPrefix('lease-core')
    const limiter = new Limiter({ max: 1000, window: '400ms', prefix, lease: true, store: redis() })
    // Early in a window, so the give-back (after 100 ms idle) falls in the same window.
    await new Promise((r) => setTimeout(r, 400 - (Date.now() % 400) + 5))
    for (let i = 0; i < 20; i++) await limiter.consume('c')
    const key = (await scanKeys(db.client, `${escapeGlob(prefix)}*`)).find((k) => /\}:\d+$/.test(k))!
    expect(Number(await db.client.get(key))).toBeGreaterThan(20)
    await new Promise((r) => setTimeout(r, 250))
    expect(Number(await db.client.get(key))).toBe(20)
    await limiter.close()
  })

  it("leases a busy key's next window just before it starts: the first request there needs no round trip", async () => {
    const prefix = testPrefix('lease-core')
    const start = 1_700_000_000_000 // a window's start, for 1 s windows
    let now = start
    const limiter = new Limiter({ max: 1000, window: '1s', prefix, lease: true, clock: () => now, store: redis() })
    for (let i = 0; i < 50; i++) {
      expect((await limiter.consume('c')).allowed).toBe(true)
      now += 10
    }
    await new Promise((r) => setTimeout(r, 50)) // an early grant for this window lands
    const nextKey = `${prefix}{c}:${start / 1000 + 1}`
    now = start + 700 // 300 ms before the end: not yet (it is asked for at most a quarter of the window ahead)
    expect((await limiter.consume('c')).allowed).toBe(true)
    await new Promise((r) => setTimeout(r, 50))
    expect(await db.client.exists(nextKey)).toBe(0)
    now = start + 990
    expect((await limiter.consume('c')).allowed).toBe(true)
    await new Promise((r) => setTimeout(r, 50))
    const granted = Number(await db.client.get(nextKey))
    expect(granted).toBeGreaterThan(1)
    expect(await db.client.pttl(nextKey)).toBeGreaterThan(1000)
    now = start + 1005
    const first = limiter.consume('c')
    expect(first).not.toBeInstanceOf(Promise)
    expect(first).toMatchObject({ allowed: true, remaining: 1000 - 1 })
    // Nothing more was asked for: the request spent a unit of the grant made ahead.
    expect(Number(await db.client.get(nextKey))).toBe(granted)
    await limiter.close()
    expect(Number(await db.client.get(nextKey))).toBe(1)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })

  it('lets a grant made ahead lapse when the key goes quiet before its window', async () => {
    const prefix = testPrefix('lease-core')
    const start = 1_700_000_000_000
    let now = start
    const limiter = new Limiter({ max: 1000, window: '1s', prefix, lease: true, clock: () => now, store: redis() })
    for (let i = 0; i < 50; i++) {
      await limiter.consume('c')
      now += 10
    }
    now = start + 990
    await new Promise((r) => setTimeout(r, 50))
    await limiter.consume('c')
    await new Promise((r) => setTimeout(r, 50))
    const nextKey = `${prefix}{c}:${start / 1000 + 1}`
    expect(Number(await db.client.get(nextKey))).toBeGreaterThan(1)
    // Two windows on, the grant belongs to a window that is over: the slice starts empty and asks afresh.
    now = start + 2005
    const d = await limiter.consume('c')
    expect(d).toMatchObject({ allowed: true, remaining: 999 })
    expect(Number(await db.client.get(`${prefix}{c}:${start / 1000 + 2}`))).toBeGreaterThanOrEqual(1)
    await limiter.close()
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })

  it('decides a request again in the new window when its grant comes back after another request moved the slice on', async () => {
    const prefix = testPrefix('lease-core')
    const start = 1_700_000_000_000
    let now = start + 995
    const limiter = new Limiter({ max: 1000, window: '1s', prefix, lease: true, clock: () => now, store: redis() })
    const late = limiter.consume('c') // no slice yet: waits for a grant of this window
    now = start + 1005
    const next = limiter.consume('c') // the next window: the slice moves on while that grant is out
    const [a, b] = await Promise.all([late, next])
    // Stamped with the window whose units admitted it, never with the last window's time on the next's units.
    expect(a).toMatchObject({ allowed: true, at: start + 1005, resetAt: start + 2000 })
    expect(b).toMatchObject({ allowed: true, at: start + 1005 })
    await limiter.close()
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })

  it('leases GCRA units: at most the burst at once', async () => {
    const prefix = testPrefix('lease-core')
    const limiter = new Limiter({ max: 100, window: '1m', algorithm: 'gcra', burst: 30, prefix, lease: true, store: redis() })
    const decisions = await Promise.all(Array.from({ length: 100 }, () => limiter.consume('c')))
    expect(decisions.filter((d) => d.allowed)).toHaveLength(30)
    const refused = decisions.find((d) => !d.allowed)!
    expect(refused.retryAfterMs).toBeGreaterThan(0)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
    await limiter.close()
  })
})
