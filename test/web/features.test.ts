import {
  type Decision,
  gcra,
  Limiter,
  lockouts,
  MemoryStore,
  optionHints,
  register,
  remoteStores,
  type Store,
  slidingLog,
  TollgateError,
  waiting,
  withRateLimit,
} from '@tollgate/web'

// @tollgate/web builds on the Limiter of @tollgate/core/lean: the fixed window and the options every limiter
// reads, and the rest once registered (`register(gcra)`), so a Worker's bundle carries only what it uses
// (test/web/bundle.test.ts measures it). This file imports nothing else that would register features: each
// jest test file has modules of its own, so what it sees is what an app on @tollgate/web alone sees. The
// cases run in order: refused while unregistered, then registered.

const ok = () => new Response('ok')
const request = () => new Request('http://app.test/', { headers: { 'x-forwarded-for': '203.0.113.9' } })
const key = (r: Request) => r.headers.get('x-forwarded-for') ?? 'none'

const quiet = { warn: () => {}, error: () => {} }

/**
 * A store outside the process, as a store of an app's own would be: its counts in a memory store behind a
 * promise, failing while `up()` is false.
 */
function remote(up: () => boolean = () => true): Store {
  const inner = new MemoryStore()
  const later = <T>(f: () => T) => (up() ? Promise.resolve().then(f) : Promise.reject(new Error('store down')))
  return {
    local: false,
    admit: (call) => later(() => inner.admit(call)),
    increment: (key, cost, windowMs, now) => later(() => inner.increment(key, cost, windowMs, now)),
    refund: (call) => later(() => inner.refund(call)),
    forget: (call) => later(() => inner.forget(call)),
  }
}

/** The error a construction throws, or undefined. */
function thrown(make: () => unknown): TollgateError | undefined {
  try {
    make()
  } catch (error) {
    return error as TollgateError
  }
  return undefined
}

describe('a Limiter of @tollgate/web before anything is registered', () => {
  it('counts with the fixed window and the memory store', async () => {
    const handler = withRateLimit(ok, { max: 2, window: '1m', key })
    expect((await handler(request())).status).toBe(200)
    expect((await handler(request())).status).toBe(200)
    const refused = await handler(request())
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).not.toBeNull()
  })

  it.each([
    ['algorithm', { algorithm: 'gcra' }, 'gcra'],
    ['algorithm', { algorithm: 'sliding-log' }, 'slidingLog'],
    ['algorithm', { algorithm: 'sliding-window' }, 'slidingWindow'],
    ['algorithm', { algorithm: 'concurrency' }, 'concurrency'],
    ['blockDuration', { blockDuration: '1m' }, 'lockouts'],
    ['allowList', { allowList: ['10.0.0.0/8'] }, 'clientLists'],
    ['denyList', { denyList: ['203.0.113.9'] }, 'clientLists'],
    ['meterProvider', { meterProvider: { getMeter: () => ({}) } }, 'metrics'],
    ['lease', { lease: true }, 'leasing'],
    ['actualCost', { actualCost: () => 1 }, 'settling'],
  ])('refuses %s %j at construction, naming the option and the feature that registers it', (option, options, feature) => {
    const error = thrown(() => new Limiter({ ...(options as object), store: new MemoryStore() }))
    expect(error).toBeInstanceOf(TollgateError)
    expect(error).toMatchObject({ code: 'TG_INVALID_OPTION' })
    expect(error!.message).toContain(`Invalid option "${option}"`)
    expect(error!.message).toContain(`register(${feature})`)
  })

  it('rejects wait() and settle(), naming their features; refunds and releases need none', async () => {
    const limiter = new Limiter({ max: 1 })
    await expect(limiter.wait('k', { maxWaitMs: 10 })).rejects.toThrow(/register\(waiting\)/)
    const decision = await limiter.consume('k')
    await expect(limiter.settle(decision, 1)).rejects.toThrow(/register\(settling\)/)
    await limiter.refund(decision)
    expect((await limiter.consume('k')).allowed).toBe(true)
  })

  it('refuses a store outside the process, naming remoteStores', () => {
    const error = thrown(() => new Limiter({ store: remote() }))
    expect(error).toMatchObject({ code: 'TG_INVALID_OPTION' })
    expect(error!.message).toContain('Invalid option "store"')
    expect(error!.message).toContain('register(remoteStores)')
  })

  it("refuses an unknown option, listing the known ones; the guess of another limiter's name comes with optionHints", () => {
    const before = thrown(() => new Limiter({ windowMs: 1000 } as object))
    expect(before).toMatchObject({ code: 'TG_UNKNOWN_OPTION' })
    expect(before!.message).toContain('known options: ')
    expect(before!.message).not.toContain('did you mean')
    register(optionHints)
    expect(thrown(() => new Limiter({ windowMs: 1000 } as object))!.message).toContain('(did you mean "window"?)')
  })

  it('takes the options that need no feature: a list as a function, lease: false', async () => {
    const limiter = new Limiter({ max: 1, allowList: () => false, lease: false })
    expect((await limiter.consume('k')).allowed).toBe(true)
  })
})

describe('once registered', () => {
  beforeAll(() => register(gcra, slidingLog, waiting, lockouts))

  it('decides with a registered algorithm', async () => {
    const clock = { now: 1_000_000 }
    const limiter = new Limiter({ algorithm: 'sliding-log', max: 2, window: '10s', clock: () => clock.now })
    expect((await limiter.consume('k')).allowed).toBe(true)
    clock.now += 1000
    expect((await limiter.consume('k')).allowed).toBe(true)
    const refused = await limiter.consume('k')
    expect(refused).toMatchObject({ allowed: false, retryAfterMs: 9000 })
    const burst = new Limiter({ algorithm: 'gcra', max: 10, burst: 2 })
    expect((await burst.consume('k')).remaining).toBe(1)
  })

  it('waits, and blocks', async () => {
    const limiter = new Limiter({ max: 1, window: '50ms' })
    await limiter.consume('k')
    expect((await limiter.wait('k', { maxWaitMs: 1000 })).allowed).toBe(true)
    const blocking = new Limiter({ max: 1, window: '1m', blockDuration: '1h' })
    await blocking.consume('k')
    expect(await blocking.consume('k')).toMatchObject({ allowed: false })
    expect((await blocking.consume('k')).retryAfterMs).toBeGreaterThan(60_000)
  })

  it('counts in a store outside the process once remoteStores is registered, its failures by onStoreError', async () => {
    register(remoteStores)
    let up = true
    const store = remote(() => up)
    const limiter = new Limiter({ store, max: 1, window: '1m', onStoreError: 'fallback', logger: quiet })
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, source: 'store' })
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, source: 'store' })
    // A client over its limit is refused without a round trip (the over-limit cache).
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, source: 'cache' })
    up = false
    const failed = (await limiter.consume('j')) as Decision
    expect(failed).toMatchObject({ allowed: true, source: 'fallback' })
  })

  it('still refuses what was not registered', () => {
    expect(thrown(() => new Limiter({ algorithm: 'concurrency' }))?.message).toContain('register(concurrency)')
  })

  it('refuses what is not a feature', () => {
    expect(() => register({} as never)).toThrow(TollgateError)
  })
})
