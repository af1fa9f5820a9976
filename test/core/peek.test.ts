import { type AlgorithmName, type Decision, Limiter, type LimiterOptions } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// `peek` has one definition: what is left, counting nothing and emitting nothing, whether the limit
// is written as `max` (the batched INCRBY path, which counts refused requests too) or as `limits`
// (the script path, which does not), and for every algorithm.

const db = useRedis()

const stores = db.stores()
const algorithms: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log']
const now = 1_800_000_000_000 + 5_000 // 5 s into a minute

/** What a caller reads from a peek: everything but the clock-dependent `at` and the key. */
function answer(d: Decision) {
  return { allowed: d.allowed, remaining: d.remaining, count: d.count, resetAt: d.resetAt, retryAfterMs: d.retryAfterMs, limit: d.limit }
}

async function afterRequests(options: LimiterOptions, requests: number) {
  const limiter = new Limiter({ ...options, clock: () => now, logger: { warn() {}, error() {} } })
  for (let i = 0; i < requests; i++) await limiter.consume('client')
  const events: string[] = []
  for (const event of ['limited', 'fallback', 'storeError', 'recover']) limiter.on(event, () => events.push(event))
  const first = await limiter.peek('client')
  const second = await limiter.peek('client')
  const fromPeeks = [...events]
  const next = await limiter.consume('client') // what the peek predicted
  return { first: answer(first), second: answer(second), events: fromPeeks, next: next.allowed }
}

describe.each(stores)('peek on the %s store', (_name, makeStore) => {
  it.each([2, 3])('answers the same for { max: 2 } and { limits: [{ max: 2 }] } after %i requests, and emits nothing', async (n) => {
    const asMax = await afterRequests({ max: 2, window: '1m', store: makeStore(), prefix: testPrefix('peek-max') }, n)
    const asLimits = await afterRequests({ limits: [{ max: 2, window: '1m' }], store: makeStore(), prefix: testPrefix('peek-limits') }, n)
    expect(asMax.first).toEqual(asLimits.first)
    expect(asMax.first).toEqual({ allowed: false, remaining: 0, count: 2, resetAt: now + 55_000, retryAfterMs: 55_000, limit: 2 })
    expect(asMax.events).toEqual([])
    expect(asLimits.events).toEqual([])
  })

  it('reports what is left before the limit is reached, and counts nothing', async () => {
    const r = await afterRequests({ max: 3, window: '1m', store: makeStore(), prefix: testPrefix('peek-left') }, 1)
    expect(r.first).toEqual({ allowed: true, remaining: 2, count: 1, resetAt: now + 55_000, retryAfterMs: 0, limit: 3 })
    expect(r.second).toEqual(r.first) // the first peek counted nothing
    expect(r.next).toBe(true)
  })

  it.each(algorithms)(
    '%s: the peek after max requests predicts the refusal of the next, and after max − 1 its admission',
    async (algorithm) => {
      for (const [n, allowed] of [
        [2, true],
        [3, false],
      ] as const) {
        const r = await afterRequests({ algorithm, max: 3, window: '1m', store: makeStore(), prefix: testPrefix(`peek-${algorithm}`) }, n)
        expect(r.first.allowed).toBe(allowed)
        expect(r.first.remaining).toBe(3 - n)
        expect(r.second).toEqual(r.first)
        expect(r.next).toBe(allowed)
        expect(r.events).toEqual([])
      }
    },
  )
})
