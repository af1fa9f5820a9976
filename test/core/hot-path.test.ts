import { type Decision, type HeaderStyle, Limiter, MemoryStore, rateLimitHeaders } from '@tollgate/core'
import { random } from '../support/random'

/*
 * The hot path's shortcuts must decide and answer exactly as the long way does:
 * - the limiter's own cells of the memory store (counting.ts, Store.cell) against a store whose
 *   `increment` is overridden, which takes the store's increment path;
 * - the header records kept per policy, remaining and reset second (response.ts) against records
 *   built afresh by rateLimitHeaders.
 */

/** A MemoryStore whose overridden `increment` turns the limiter's cells off: the reference path. */
class IncrementOnly extends MemoryStore {
  override increment(key: string, cost: number, windowMs: number, now: number): number {
    return super.increment(key, cost, windowMs, now)
  }
}

const summary = (d: Decision) => ({ allowed: d.allowed, remaining: d.remaining, count: d.count, resetAt: d.resetAt })

describe('the memory store counted through the limiter’s cells', () => {
  it('decides as the store’s increment does, over resets, window edges and a clock stepping back', () => {
    const next = random(17)
    let now = 1_763_729_100_000
    const clock = () => now
    const quiet = { warn: () => {}, error: () => {} }
    const cells = new Limiter({ max: 5, window: '2s', clock, logger: quiet, store: new MemoryStore({ sweepIntervalMs: 0 }) })
    const plain = new Limiter({ max: 5, window: '2s', clock, logger: quiet, store: new IncrementOnly({ sweepIntervalMs: 0 }) })
    const keys = ['a', 'b', 'c', 'd']
    let compared = 0
    for (let step = 0; step < 5000; step++) {
      const r = next()
      const key = keys[Math.floor(next() * keys.length)]!
      if (r < 0.02) {
        cells.reset(key)
        plain.reset(key)
      } else if (r < 0.12) {
        now += Math.floor(next() * 900) // into the next window, sometimes
      } else if (r < 0.13) {
        now -= Math.floor(next() * 3000) // the clock steps back
      } else {
        const cost = 1 + Math.floor(next() * 2)
        expect(summary(cells.consume(key, cost) as Decision)).toEqual(summary(plain.consume(key, cost) as Decision))
        compared++
      }
    }
    expect(compared).toBeGreaterThan(4000)
  })

  it('decides as the store’s increment does over sweeps, a full map and a sliding window of the same length', () => {
    const next = random(29)
    let now = 1_763_729_100_000
    const clock = () => now
    const quiet = { warn: () => {}, error: () => {} }
    // Two stores, each with a fixed-window limiter and a sliding-window limiter of the same length,
    // maxKeys below the clients so the map fills: the cells' limiter against increment's.
    const side = (store: MemoryStore) => ({
      store,
      fixed: new Limiter({ max: 4, window: '1s', clock, logger: quiet, store }),
      sliding: new Limiter({ max: 4, window: '1s', clock, logger: quiet, store, algorithm: 'sliding-window', prefix: 'sw:' }),
    })
    const cells = side(new MemoryStore({ sweepIntervalMs: 0, maxKeys: 5, logger: quiet }))
    const plain = side(new IncrementOnly({ sweepIntervalMs: 0, maxKeys: 5, logger: quiet }))
    const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g']
    let slidingFrom = 3000 // the sliding limiters start counting part-way, as one added to a running app
    const outcomes = { fresh: 0, compared: 0 }
    for (let step = 0; step < 12_000; step++) {
      const r = next()
      const key = keys[Math.floor(next() * keys.length)]!
      if (r < 0.1) now += Math.floor(next() * 700)
      else if (r < 0.13) {
        cells.store.prune(now)
        plain.store.prune(now)
      } else if (r < 0.15) {
        expect(summary(cells.fixed.peek(key) as Decision)).toEqual(summary(plain.fixed.peek(key) as Decision))
        expect(cells.store.size).toBe(plain.store.size)
      } else if (r < 0.2 && step > slidingFrom) {
        expect(summary(cells.sliding.consume(key) as Decision)).toEqual(summary(plain.sliding.consume(key) as Decision))
      } else {
        const a = cells.fixed.consume(key) as Decision
        expect(summary(a)).toEqual(summary(plain.fixed.consume(key) as Decision))
        if (a.count === 1) outcomes.fresh++ // a client's first count in a window
        outcomes.compared++
      }
      if (step === 9000) slidingFrom = Number.POSITIVE_INFINITY
    }
    expect(outcomes.compared).toBeGreaterThan(8000)
    expect(outcomes.fresh).toBeGreaterThan(500)
  })

  it('shares its counts with the store: peek, a reset and the sweep see what the cells counted', () => {
    let now = 1_763_729_100_250
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    const limiter = new Limiter({ max: 3, store, clock: () => now })
    for (let i = 0; i < 2; i++) limiter.consume('k')
    expect((limiter.peek('k') as Decision).count).toBe(2)
    expect(store.size).toBe(1)
    limiter.reset('k')
    expect((limiter.peek('k') as Decision).count).toBe(0)
    expect((limiter.consume('k') as Decision).count).toBe(1)
    now += 1000
    store.prune(now)
    expect(store.size).toBe(0)
    expect((limiter.consume('k') as Decision).count).toBe(1) // a new window, a new cell
    expect(store.size).toBe(1)
  })

  it('calls an increment put in place of the store’s after the limiter was built (a spy)', () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    const limiter = new Limiter({ max: 3, store, clock: () => 1_763_729_100_250 })
    limiter.consume('k')
    const seen: string[] = []
    const increment = store.increment.bind(store)
    store.increment = (key, cost, windowMs, now) => {
      seen.push(key)
      return increment(key, cost, windowMs, now)
    }
    expect((limiter.consume('k') as Decision).count).toBe(2)
    expect(seen).toEqual(['tg:{k}'])
  })

  it('counts exactly past the clients it keeps cells for', () => {
    const limiter = new Limiter({ max: 2, store: new MemoryStore({ sweepIntervalMs: 0 }), clock: () => 1_763_729_100_250 })
    for (let i = 0; i < 70_000; i++) limiter.consume(`c${i}`)
    expect((limiter.consume('c0') as Decision).count).toBe(2)
    expect((limiter.consume('c69999') as Decision).count).toBe(2)
    expect((limiter.consume('c69999') as Decision).allowed).toBe(false)
  })
})

describe('header records kept per policy and quota', () => {
  const at = 1_763_729_100_250

  it('gives clients with the same quota left one record, and a new one when the reset second changes', () => {
    let now = at
    const limiter = new Limiter({ max: 100, window: '1m', clock: () => now })
    const a = limiter.consume('a') as Decision
    const b = limiter.consume('b') as Decision
    const first = limiter.headers([a])
    expect(limiter.headers([b])).toBe(first)
    expect(first).toEqual({ 'RateLimit-Policy': '"100-per-1m";q=100;w=60', RateLimit: '"100-per-1m";r=99;t=60' })
    now += 1000
    const later = limiter.headers([limiter.consume('c') as Decision])
    expect(later).not.toBe(first)
    expect(later.RateLimit).toBe('"100-per-1m";r=99;t=59')
  })

  it.each([
    ['draft-8', false],
    ['draft-7', true],
    ['draft-6', false],
    ['draft-8', true],
  ] as const)('matches records built afresh, %s with legacy fields %s, over random traffic', (style, legacy) => {
    const next = random(style.length + (legacy ? 1 : 0))
    let now = at
    const limiter = new Limiter({ max: 300, window: '3s', headers: style as HeaderStyle, legacyHeaders: legacy, clock: () => now })
    let reused = 0
    const seen = new Set<object>()
    for (let i = 0; i < 3000; i++) {
      if (next() < 0.05) now += Math.floor(next() * 1500)
      const d = limiter.consume(`client-${Math.floor(next() * 8)}`, 1 + Math.floor(next() * 3)) as Decision
      const record = limiter.headers([d])
      expect(record).toEqual(rateLimitHeaders([d], style as HeaderStyle, legacy))
      if (seen.has(record)) reused++
      seen.add(record)
    }
    expect(reused).toBeGreaterThan(100) // the records are in fact shared
  })

  it('keeps the families headersOn chooses in a shared record', () => {
    let now = at
    const limiter = new Limiter({ max: 2, window: '1m', headersOn: 'refused', clock: () => now, key: () => 'k' })
    const allowed = limiter.check({}) as Decision
    expect(limiter.headers([allowed])).toEqual({})
    expect(limiter.headers([limiter.check({}) as Decision])).toBe(limiter.headers([allowed]))
    now += 10
    const refused = limiter.check({}) as Decision
    expect(limiter.headers([refused])).toEqual({
      'RateLimit-Policy': '"2-per-1m";q=2;w=60',
      RateLimit: '"2-per-1m";r=0;t=60',
      'Retry-After': '60',
      'Cache-Control': 'no-store',
    })
  })

  it.each([
    [{ headers: false }, {}],
    [
      { headers: false, legacyHeaders: true },
      { 'X-RateLimit-Limit': '1000', 'X-RateLimit-Remaining': '999', 'X-RateLimit-Reset': '1763729160' },
    ],
  ] as const)('builds no record for allowed requests when they carry no fields (%j)', (options, first) => {
    let now = at
    const limiter = new Limiter({ max: 1000, window: '1m', ...options, clock: () => now })
    const records = new Set<object>()
    for (let i = 0; i < 50; i++) {
      now += 7
      records.add(limiter.headers([limiter.consume('one client') as Decision]))
    }
    // With no fields the one record serves every request; with legacy fields each remaining value needs its own.
    expect(records.size).toBe(Object.keys(first).length === 0 ? 1 : 50)
    expect([...records][0]).toEqual(first)
  })
})

describe('header records past the policies kept', () => {
  it('still builds the right record for a max function with more values than policies are kept for', () => {
    let n = 0
    const limiter = new Limiter<{ max: number }>({ max: (r) => r.max, key: () => `k${n++}`, clock: () => 1_763_729_100_250 })
    for (let max = 1; max <= 600; max++) {
      const d = limiter.check({ max }) as Decision
      expect(limiter.headers([d])).toEqual(rateLimitHeaders([d], 'draft-8', false))
      expect(limiter.headers([d]).RateLimit).toBe(`"${max}-per-1s";r=${max - 1};t=1`)
    }
  })
})
