import { type AlgorithmName, Limiter, type LimiterOptions, type Store } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { type TestClock, testClock } from './time'

/**
 * One request of a decision table and what it must get:
 * [ms after the table's start, cost, allowed, remaining, retryAfterMs, resetAt − start].
 */
export type Row = [at: number, cost: number, allowed: boolean, remaining: number, retryAfterMs: number, resetAt: number]

/**
 * Sends the table's requests for `key` in order, the clock set to each row's time, and returns the
 * rows as decided: `expect(await replay(...)).toEqual(rows)` shows a wrong row in place.
 */
export async function replay(limiter: Limiter, clock: TestClock, key: string, start: number, rows: readonly Row[]): Promise<Row[]> {
  const decided: Row[] = []
  for (const [at, cost] of rows) {
    clock.now = start + at
    const d = await limiter.consume(key, cost)
    decided.push([at, cost, d.allowed, d.remaining, d.retryAfterMs, d.resetAt - start])
  }
  return decided
}

/**
 * One algorithm's decision tables, on the stores of `useRedis().stores()`: opens a Redis client for the
 * file (`client()` for tests of its own), and hands each store's tests a factory of limiters with the
 * algorithm, `defaults`, a fresh store, a prefix of their own and a clock they move by hand.
 */
export function algorithmSuite(algorithm: AlgorithmName, defaults: LimiterOptions) {
  const redis = useRedis()
  return {
    client: () => redis.client,
    each(body: (limiter: (options?: LimiterOptions) => { limiter: Limiter; clock: TestClock }, makeStore: () => Store) => void) {
      describe.each(redis.stores())(`${algorithm} on the %s store`, (_storeName, makeStore) => {
        body((options = {}) => {
          const clock = testClock()
          const limiter = new Limiter({
            algorithm,
            ...defaults,
            store: makeStore(),
            prefix: testPrefix(algorithm),
            clock: clock.read,
            ...options,
          })
          return { limiter, clock }
        }, makeStore)
      })
    },
  }
}

/**
 * Requests admitted for one client by a limiter of max 10 per second when 10 arrive 100 ms before a
 * window edge, 10 in the last ms before it and 10 in the first ms after it: 2 × max for the fixed
 * window, each other algorithm its own bound.
 */
export async function admittedAcrossEdge(algorithm: AlgorithmName, store: Store): Promise<number> {
  const edge = Math.floor(Date.now() / 1000) * 1000 + 60_000
  let now = edge - 100
  const limiter = new Limiter({ max: 10, algorithm, store, prefix: testPrefix('edge'), clock: () => now })
  let admitted = 0
  for (const at of [edge - 100, edge - 1, edge]) {
    now = at
    for (let i = 0; i < 10; i++) if ((await limiter.consume('c')).allowed) admitted++
  }
  return admitted
}
