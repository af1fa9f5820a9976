import { type Decision, Limiter, type Logger, MemoryStore } from '@tollgate/core'
import { countOf, resetCount } from '../support/store-calls'

function silentLogger() {
  const lines: string[] = []
  const logger: Logger = { warn: (m) => void lines.push(m), error: (m) => void lines.push(m) }
  return { logger, lines }
}

describe('fixed window edges with an injected clock', () => {
  it('resets the count exactly at the start of the next window', () => {
    let now = 1_000_000 // a window edge for 1 s windows
    const limiter = new Limiter({ max: 3, clock: () => now, key: () => 'c' })
    const at = () => limiter.check({}) as Decision
    now += 999
    expect([at(), at(), at(), at()].map((d) => d.allowed)).toEqual([true, true, true, false])
    now += 1 // first ms of the next window
    const next = at()
    expect(next.allowed).toBe(true)
    expect(next.remaining).toBe(2)
  })

  it('reports seconds left rounded up in Retry-After and t', () => {
    let now = 60_000 * 1000
    const limiter = new Limiter({ max: 1, window: '1 minute', clock: () => now, key: () => 'c' })
    limiter.check({})
    now += 59_001 // 999 ms left
    const refused = limiter.check({}) as Decision
    expect(refused.retryAfterMs).toBe(999)
    const headers = limiter.headers([refused])
    expect(headers['Retry-After']).toBe('1')
    expect(headers.RateLimit).toBe('"1-per-1m";r=0;t=1')
    now -= 30_000 // 30.999 s left
    const earlier = limiter.check({}) as Decision
    expect(limiter.headers([earlier])['Retry-After']).toBe('31')
  })

  // Fractions under one half are the ones Math.round would get wrong: a client told "29" with 29.4 s
  // left comes back early and is refused again. The fractions above (.999) pass with either rounding.
  it.each([
    [29_400, '30'],
    [200, '1'],
    [1, '1'],
    [30_001, '31'],
  ])('rounds %i ms left up to %s s in both Retry-After and the RateLimit t parameter', (msLeft, seconds) => {
    const windowStart = 60_000 * 1000
    let now = windowStart
    const limiter = new Limiter({ max: 1, window: '1 minute', clock: () => now, key: () => 'c' })
    limiter.check({})
    now = windowStart + 60_000 - msLeft
    const refused = limiter.check({}) as Decision
    expect(refused.allowed).toBe(false)
    expect(refused.retryAfterMs).toBe(msLeft)
    const headers = limiter.headers([refused])
    expect(headers['Retry-After']).toBe(seconds)
    expect(headers.RateLimit).toBe(`"1-per-1m";r=0;t=${seconds}`)
  })

  it('aligns windows to the clock, not to the first request', () => {
    let now = 10_500
    const limiter = new Limiter({ max: 1, clock: () => now, key: () => 'c' })
    expect((limiter.check({}) as Decision).resetAt).toBe(11_000)
    now = 10_999
    expect((limiter.check({}) as Decision).allowed).toBe(false)
    now = 11_000
    expect((limiter.check({}) as Decision).allowed).toBe(true)
  })
})

describe('limiter decisions', () => {
  it('counts cost units and refuses a request that would cross the limit', () => {
    const limiter = new Limiter({ max: 10, cost: 4, key: () => 'c', clock: () => 5000 })
    expect([1, 2, 3].map(() => (limiter.check({}) as Decision).allowed)).toEqual([true, true, false])
  })

  it('skips requests when skip says so, without counting them', async () => {
    const limiter = new Limiter<{ path: string }>({ max: 1, key: () => 'c', skip: (r) => r.path === '/health', clock: () => 5000 })
    expect(limiter.check({ path: '/health' })).toBeUndefined()
    expect(await limiter.check({ path: '/health' })).toBeUndefined()
    expect((limiter.check({ path: '/' }) as Decision).allowed).toBe(true)
  })

  it('accepts async key, max and cost functions', async () => {
    const limiter = new Limiter<{ user: string }>({
      key: async (r) => r.user,
      max: async () => 2,
      cost: async () => 1,
      clock: () => 5000,
    })
    const results = []
    for (let i = 0; i < 3; i++) results.push((await limiter.check({ user: 'u1' }))!.allowed)
    expect(results).toEqual([true, true, false])
    expect((await limiter.check({ user: 'u2' }))!.allowed).toBe(true)
  })

  it('keys by the client IP the adapter reports, and shares one bucket for requests without one (logged once)', () => {
    const { logger, lines } = silentLogger()
    const limiter = new Limiter<{ ip?: string }>({ max: 1, logger, clock: () => 5000 }, { ip: (r) => r.ip })
    expect((limiter.check({ ip: '198.51.100.1' }) as Decision).key).toBe('198.51.100.1')
    expect((limiter.check({ ip: '::ffff:198.51.100.2' }) as Decision).key).toBe('198.51.100.2')
    const first = limiter.check({}) as Decision
    const second = limiter.check({ ip: '' }) as Decision
    expect(first.key).toBe('unknown-ip')
    expect(first.key).not.toContain('undefined')
    expect(second.allowed).toBe(false)
    expect(lines.filter((l) => l.includes('could not resolve the client IP'))).toHaveLength(1)
  })

  it('hashes enormous client keys so they cannot blow up store keys', () => {
    const limiter = new Limiter({ key: () => 'x'.repeat(100_000), clock: () => 5000 })
    const d = limiter.check({}) as Decision
    expect(d.key.length).toBeLessThan(64)
    expect((limiter.check({}) as Decision).count).toBe(2)
  })

  it.each([
    ['key', { key: () => 42 }, /Option "key" returned 42 \(number\)/],
    ['key', { key: () => '' }, /Option "key" returned "" \(string\)/],
    ['max', { max: () => Number.NaN }, /Option "max" returned NaN/],
    ['max', { max: () => -3 }, /Option "max" returned -3/],
    ['cost', { cost: () => 0.5 }, /Option "cost" returned 0\.5/],
    [
      'key',
      {
        key: () => {
          throw new Error('boom')
        },
      },
      /Option "key" threw boom/,
    ],
    [
      'skip',
      {
        skip: () => {
          throw new Error('nope')
        },
      },
      /Option "skip" threw nope/,
    ],
  ])('turns a bad %s at request time into a TollgateError, logged once', async (_name, options, pattern) => {
    const { logger, lines } = silentLogger()
    const limiter = new Limiter({ key: () => 'c', ...(options as object), logger })
    for (let i = 0; i < 3; i++) {
      let error: unknown
      try {
        await limiter.check({})
      } catch (e) {
        error = e
      }
      expect((error as Error).message).toMatch(pattern)
      expect((error as { code: string }).code).toBe('TG_INVALID_REQUEST_VALUE')
    }
    expect(lines).toHaveLength(1)
  })

  it('offers consume() for code outside HTTP', () => {
    const limiter = new Limiter({ max: 2, clock: () => 5000 })
    expect([1, 2, 3].map(() => (limiter.consume('job:42') as Decision).allowed)).toEqual([true, true, false])
    expect((limiter.consume('job:43', 2) as Decision).remaining).toBe(0)
  })
})

describe('memory store', () => {
  it('frees every count of a window once the window has passed', () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    for (let i = 0; i < 1000; i++) store.increment(`k${i}`, 1, 1000, 5_500)
    expect(store.size).toBe(1000)
    store.prune(5_999)
    expect(store.size).toBe(1000)
    store.prune(6_000)
    expect(store.size).toBe(0)
  })

  it('starts a new window without a timer per key', () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    store.increment('a', 1, 1000, 5_100)
    store.increment('b', 1, 1000, 5_100)
    expect(store.increment('a', 1, 1000, 6_000)).toBe(1)
    expect(store.size).toBe(1)
  })

  it('keeps windows of different lengths apart', async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    expect(store.increment('a', 1, 1000, 5_100)).toBe(1)
    expect(store.increment('a', 1, 60_000, 5_100)).toBe(1)
    expect(await countOf(store, 'a', 1000, 5_200)).toBe(1)
    await resetCount(store, 'a', 1000, 5_200)
    expect(await countOf(store, 'a', 1000, 5_200)).toBe(0)
    expect(await countOf(store, 'a', 60_000, 5_200)).toBe(1)
  })
})

describe('many distinct clients', () => {
  // More clients than the limiter keeps store keys built for, so its memo of them starts over
  // several times: every client must still get exactly its own count.
  it('counts each of 40,000 clients on its own, two rounds over all of them', () => {
    const now = 5_000_000
    const limiter = new Limiter<{ k: string }>({ max: 1, window: '1m', clock: () => now, key: (r) => r.k })
    const clients = Array.from({ length: 40_000 }, (_, i) => `client-${i}`)
    const round = () => clients.map((k) => (limiter.check({ k }) as Decision).allowed)
    expect(round().every((allowed) => allowed)).toBe(true)
    expect(round().some((allowed) => allowed)).toBe(false)
  })
})
