import { type AlgorithmName, type Decision, Limiter, type LimiterOptions, MemoryStore, RedisStore, type Store } from '@tollgate/core'
import { limitSpec, storeCall } from '@tollgate/core/testing'
import { keysWithoutTtl, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// limiter.settle(decision, actualCost): an admitted decision's count moves from its estimate to its
// actual cost in the decision's own window, on every algorithm (the fixed window on its increment fast
// path and on the admit path), on the memory store and on Redis through both clients.

const db = useRedis({ nodeRedis: true })
const quiet = { warn() {}, error() {} }
const W = 60_000
/** 1 s into a minute, far from any edge. */
const T0 = Math.floor(1_800_000_000_000 / W) * W + 1000

const STORES: Array<[string, () => Store]> = [
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis (ioredis)', () => new RedisStore({ client: db.client, timeout: '2s' })],
  ['Redis (node-redis)', () => new RedisStore({ client: db.nodeRedis, timeout: '2s' })],
]

/** Each algorithm, and the fixed window twice: alone it takes the increment fast path, as `limits` the admit script. */
const SHAPES: Array<[string, AlgorithmName, boolean]> = [
  ['fixed-window (increment)', 'fixed-window', false],
  ['fixed-window (admit)', 'fixed-window', true],
  ['sliding-window', 'sliding-window', false],
  ['gcra', 'gcra', false],
  ['sliding-log', 'sliding-log', false],
]

function limiter(store: Store, algorithm: AlgorithmName, asLimits: boolean, max: number, clock: () => number, prefix: string) {
  const shape: LimiterOptions = asLimits ? { limits: [{ max, window: '1m' }] } : { max, window: '1m' }
  return new Limiter({ ...shape, algorithm, store, prefix, clock, logger: quiet })
}

describe.each(STORES)('limiter.settle on the %s store', (_name, makeStore) => {
  describe.each(SHAPES)('%s', (_shape, algorithm, asLimits) => {
    let now = T0
    const clock = () => now
    beforeEach(() => {
      now = T0
    })

    it('estimate 100 then actual 30 frees 70 in that window', async () => {
      const l = limiter(makeStore(), algorithm, asLimits, 200, clock, testPrefix('settle-down'))
      const d = await l.consume('c', 100)
      expect([d.allowed, (await l.peek('c')).remaining]).toEqual([true, 100])
      await l.settle(d, 30)
      expect((await l.peek('c')).remaining).toBe(170)
      expect((await l.consume('c', 170)).allowed).toBe(true)
      expect((await l.consume('c', 1)).allowed).toBe(false)
    })

    it('actual 250 charges 150 more, past the limit: the next request over the limit is refused', async () => {
      const l = limiter(makeStore(), algorithm, asLimits, 200, clock, testPrefix('settle-up'))
      const d = await l.consume('c', 100)
      await l.settle(d, 250)
      const peek = await l.peek('c')
      expect([peek.allowed, peek.remaining]).toEqual([false, 0])
      // Without the 150 more, this one unit would have fitted (100 of 200 used).
      const next = await l.consume('c', 1)
      expect([next.allowed, next.source]).toEqual([false, 'store'])
    })

    it("changes nothing once the decision's window has ended", async () => {
      const store = makeStore()
      const l = limiter(store, algorithm, asLimits, 200, clock, testPrefix('settle-late'))
      const down = await l.consume('down', 100)
      const up = await l.consume('up', 100)
      await l.consume('control', 100)
      now = T0 + W // the next window, and a whole window after the decisions
      await l.settle(down, 30)
      await l.settle(up, 250)
      for (const at of [T0 + W, T0 + W + 500, T0]) {
        now = at
        const control = await l.peek('control')
        const seen = [await l.peek('down'), await l.peek('up')].map((p) => [p.allowed, p.remaining, p.count])
        expect({ at: at - T0, seen }).toEqual({ at: at - T0, seen: [0, 1].map(() => [control.allowed, control.remaining, control.count]) })
      }
    })

    it('settles once: a second settle changes nothing, and a refund after it gives back what was finally charged', async () => {
      const l = limiter(makeStore(), algorithm, asLimits, 200, clock, testPrefix('settle-once'))
      const d = await l.consume('c', 100)
      await l.settle(d, 30)
      await l.settle(d, 180) // ignored
      expect((await l.peek('c')).remaining).toBe(170)
      await l.refund(d)
      expect((await l.peek('c')).remaining).toBe(200)
      const e = await l.consume('c', 10)
      await l.refund(e)
      await l.settle(e, 50) // refunded already: nothing left to settle
      expect((await l.peek('c')).remaining).toBe(200)
    })

    it('leaves decisions that counted nothing alone: refused, shadowed, and of another limiter', async () => {
      const store = makeStore()
      const l = limiter(store, algorithm, asLimits, 200, clock, testPrefix('settle-none'))
      await l.consume('c', 150)
      const refused = await l.consume('c', 100)
      expect(refused.allowed).toBe(false)
      // What is left now: 50, or 0 on the fixed window's fast path, which counts refused requests too.
      const left = (await l.peek('c')).remaining
      await l.settle(refused, 0)
      const other = limiter(makeStore(), algorithm, asLimits, 200, clock, testPrefix('settle-other'))
      await l.settle(await other.consume('c', 100), 0)
      expect((await l.peek('c')).remaining).toBe(left)
      const shadow = new Limiter({ max: 10, window: '1m', algorithm, store, prefix: testPrefix('settle-shadow'), clock, shadow: true })
      await shadow.consume('s', 10)
      const shadowed = await shadow.consume('s', 5)
      expect([shadowed.allowed, shadowed.shadowed]).toEqual([true, true])
      await shadow.settle(shadowed, 0)
      expect((await shadow.peek('s')).remaining).toBe(0)
    })
  })
})

describe.each(STORES.slice(1))('200 concurrent settles on the %s store', (_name, makeStore) => {
  it.each(SHAPES)('%s: leave the count exactly the sum of the actual costs', async (_shape, algorithm, asLimits) => {
    const prefix = testPrefix('settle-concurrent')
    // GCRA's numbers are exact in whole units below a max of 4096 (gcra.ts, verdict).
    const l = limiter(makeStore(), algorithm, asLimits, 4000, () => T0, prefix)
    const decisions: Decision[] = []
    for (let i = 0; i < 200; i++) decisions.push(await l.consume('hot', 5))
    expect(decisions.every((d) => d.allowed)).toBe(true)
    const actual = decisions.map((_, i) => i % 11) // 0 to 10: some settle down, some up, some not at all
    await Promise.all(decisions.map((d, i) => l.settle(d, actual[i]!)))
    const sum = actual.reduce((a, b) => a + b, 0)
    expect((await l.peek('hot')).count).toBe(sum)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })
})

describe('settle, one window among several limits', () => {
  it.each(STORES)(
    "on %s: settles each limit in its own window: after the minute ended, only the day's count moves",
    async (_n, makeStore) => {
      let now = T0
      const l = new Limiter({
        limits: [
          { max: 100, window: '1m' },
          { max: 1000, window: '1d' },
        ],
        store: makeStore(),
        prefix: testPrefix('settle-limits'),
        clock: () => now,
      })
      const d = await l.consume('c', 80)
      now = T0 + W
      await l.settle(d, 500)
      const peek = await l.peek('c')
      expect(peek.limits!.map((p) => p.remaining)).toEqual([100, 500])
    },
  )
})

describe('RedisStore.settle, sent twice', () => {
  it.each(['ioredis', 'node-redis'] as const)(
    'through %s: counts once per call id, as a resend after a reconnect would send it',
    async (client) => {
      const store = new RedisStore({ client: client === 'ioredis' ? db.client : db.nodeRedis, timeout: '2s' })
      const prefix = testPrefix('settle-twice')
      for (const algorithm of ['fixed-window', 'sliding-window', 'gcra', 'sliding-log'] as const) {
        const limits = [limitSpec(100, W, 100, '1m')]
        const call = storeCall(algorithm, `${prefix}{${algorithm}}`, limits, 10, T0)
        expect((await store.admit(call)).allowed).toBe(true)
        await store.settle(call, 40, T0)
        await store.settle(call, 40, T0)
        const left = await store.admit(storeCall(algorithm, `${prefix}{${algorithm}}`, limits, 61, T0))
        expect({ algorithm, allowed: left.allowed }).toEqual({ algorithm, allowed: false }) // 40 used: 60 left, not 90 nor 30
        expect((await store.admit(storeCall(algorithm, `${prefix}{${algorithm}}`, limits, 60, T0))).allowed).toBe(true)
      }
      expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
    },
  )
})

describe('a store without settle()', () => {
  /** A store as one written before settle existed: every required member, no settle. */
  function oldStore(): Store {
    const memory = new MemoryStore({ sweepIntervalMs: 0 })
    return { local: true, admit: (c) => memory.admit(c), refund: (c) => memory.refund(c), forget: (c) => memory.forget(c) }
  }

  it('still limits, and is refused with actualCost at construction, naming the option', () => {
    const l = new Limiter({ max: 1, store: oldStore() })
    expect([(l.consume('c') as Decision).allowed, (l.consume('c') as Decision).allowed]).toEqual([true, false])
    expect(() => new Limiter({ max: 1, store: oldStore(), actualCost: () => 1 })).toThrow(
      expect.objectContaining({ code: 'TG_INVALID_OPTION', message: expect.stringContaining('"actualCost"') }),
    )
  })

  it('fails limiter.settle with a TollgateError saying the store has no settle()', async () => {
    const l = new Limiter({ max: 5, store: oldStore() })
    await expect(l.settle(l.consume('c') as Decision, 2)).rejects.toMatchObject({
      name: 'TollgateError',
      message: expect.stringContaining('no settle()'),
    })
  })
})

describe('limiter.settle arguments', () => {
  it.each([-1, 1.5, Number.NaN, '3', undefined])('rejects actualCost %p with a TollgateError naming the value', async (value) => {
    const l = new Limiter({ max: 5 })
    await expect(l.settle(l.consume('c') as Decision, value as number)).rejects.toMatchObject({
      code: 'TG_INVALID_REQUEST_VALUE',
      message: expect.stringContaining('actualCost'),
    })
    expect((await l.peek('c')).remaining).toBe(4)
  })

  it('rejects an actualCost option that is not a function, at construction', () => {
    expect(() => new Limiter({ actualCost: 5 as never })).toThrow(/Invalid option "actualCost": expected a function .* got 5 \(number\)/)
  })
})
