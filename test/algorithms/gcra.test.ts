import { type Decision, Limiter, RedisStore } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { admittedAcrossEdge, algorithmSuite, type Row, replay } from '../support/decision-table'

// GCRA (as redis-cell's CL.THROTTLE): one unit every T = window / max, up to `burst` units at once
// (`max` by default). The state is one theoretical arrival time (TAT) per client; a refused request
// counts nothing (see packages/core/src/algorithms/gcra.ts).

const W = 10_000
const T = 2000 // W / max for max 5
/** A time a little ahead of now; GCRA has no window edges, only the TAT. */
const later = () => Math.floor(Date.now() / 1000) * 1000 + 60_000 + 123

const suite = algorithmSuite('gcra', { max: 5, window: W })

suite.each((limiter, makeStore) => {
  it('admits the whole burst at once, then one request every window / max, Retry-After exact to the ms', async () => {
    const { limiter: l, clock } = limiter()
    // [ms after the first request, cost, allowed, remaining, retryAfterMs, resetAt − first]; resetAt
    // is when the bucket is full again.
    const rows: Row[] = [
      [0, 1, true, 4, 0, T],
      [0, 1, true, 3, 0, 2 * T],
      [0, 1, true, 2, 0, 3 * T],
      [0, 1, true, 1, 0, 4 * T],
      [0, 1, true, 0, 0, 5 * T], // the last request that fits
      [0, 1, false, 0, T, 5 * T], // the first refused: one unit drips back in T
      [T - 1, 1, false, 0, 1, 5 * T],
      [T, 1, true, 0, 0, 6 * T],
      [T, 1, false, 0, T, 6 * T],
      [7000, 1, true, 1, 0, 7000 + 3.5 * T], // 5 s idle: 2.5 units back, one used
    ]
    expect(await replay(l, clock, 'c', later(), rows)).toEqual(rows)
  })

  it('counts a request of cost n as n units of T, and a refused one not at all', async () => {
    const { limiter: l, clock } = limiter()
    const rows: Row[] = [
      [0, 2, true, 3, 0, 2 * T],
      [0, 4, false, 0, T, 2 * T], // 2 + 4 > 5: in T, 1 unit is back and 4 fit
      [0, 3, true, 0, 0, 5 * T], // the refused request used nothing
    ]
    expect(await replay(l, clock, 'c', later(), rows)).toEqual(rows)
  })

  it('refuses a request costing more than the burst and counts none of it', async () => {
    const { limiter: l, clock } = limiter()
    clock.now = later()
    const refused = await l.consume('c', 6)
    expect([refused.allowed, refused.remaining]).toEqual([false, 0])
    const whole = await l.consume('c', 5)
    expect([whole.allowed, whole.remaining]).toEqual([true, 0])
  })

  it('with a burst below max, admits only the burst at once, then still max per window', async () => {
    const { limiter: l, clock } = limiter({ burst: 2 })
    const rows: Row[] = [
      [0, 1, true, 1, 0, T],
      [0, 1, true, 0, 0, 2 * T],
      [0, 1, false, 0, T, 2 * T],
      [T, 1, true, 0, 0, 3 * T],
      [2 * T, 1, true, 0, 0, 4 * T],
      [2 * T, 1, false, 0, T, 4 * T],
    ]
    expect(await replay(l, clock, 'c', later(), rows)).toEqual(rows)
  })

  describe('across a window edge (10 per second, 10 requests just before and 10 just after)', () => {
    // GCRA keeps to its burst plus what refills meanwhile (burst 10 + 100 ms × 10/s = 11).
    it('admits 11', async () => {
      expect(await admittedAcrossEdge('gcra', makeStore())).toBe(11)
    })
  })

  describe('gcra when window / max is not a whole number of ms', () => {
    // Rounding the theoretical arrival time up to a whole ms at every step used to lose one unit of
    // burst (3 per second admitted 2 at once) and to slow the steady rate (334 ms per request, not 333⅓).
    const cases: Array<[string, number, number, number | undefined]> = [
      ['3 per second', 3, 1000, undefined],
      ['6 per second', 6, 1000, undefined],
      ['7 per second', 7, 1000, undefined],
      ['7 per second with a burst of 3', 7, 1000, 3],
      ['10 per second', 10, 1000, undefined],
      ['100 per minute', 100, 60_000, undefined],
    ]
    it.each(cases)(
      '%s admits the whole burst at one instant, then one request every window / max',
      async (_name, max, windowMs, burstOption) => {
        const burst = burstOption ?? max
        const t0 = Math.floor(Date.now() / windowMs) * windowMs + 2 * windowMs + 123
        let now = t0
        const limiter = new Limiter({
          max,
          window: windowMs,
          algorithm: 'gcra',
          ...(burstOption === undefined ? {} : { burst: burstOption }),
          store: makeStore(),
          prefix: testPrefix('gcra-burst'),
          clock: () => now,
        })
        const atOnce: Array<[boolean, number]> = []
        for (let i = 0; i < burst + 2; i++) {
          const d = await limiter.consume('c')
          atOnce.push([d.allowed, d.remaining])
        }
        const expected: Array<[boolean, number]> = Array.from({ length: burst }, (_, i) => [true, burst - 1 - i])
        expect(atOnce).toEqual([...expected, [false, 0], [false, 0]])

        // From then on the n-th request is due exactly n × window / max ms after the burst: refused
        // 1 ms before, admitted on time, for three windows' worth (so a drift of 1 ms per request shows).
        const wrong: string[] = []
        for (let n = 1; n <= 3 * max; n++) {
          const due = t0 + Math.floor((n * windowMs + max - 1) / max)
          now = due - 1
          if ((await limiter.consume('c')).allowed) wrong.push(`#${n} admitted 1 ms early`)
          now = due
          if (!(await limiter.consume('c')).allowed) wrong.push(`#${n} refused when due`)
        }
        expect(wrong).toEqual([])
      },
    )

    it('a refund gives back exactly one window / max, so a refunded burst request can be sent again', async () => {
      const now = Math.floor(Date.now() / 1000) * 1000 + 2000 + 123
      const limiter = new Limiter({
        max: 3,
        algorithm: 'gcra',
        skipFailedRequests: true,
        store: makeStore(),
        prefix: testPrefix('gcra-refund'),
        clock: () => now,
      })
      const first = (await limiter.consume('c')) as Decision
      await limiter.consume('c')
      await limiter.consume('c')
      expect((await limiter.consume('c')).allowed).toBe(false)
      await limiter.refund(first)
      const again = await limiter.consume('c')
      expect([again.allowed, again.remaining]).toEqual([true, 0])
      expect((await limiter.consume('c')).allowed).toBe(false)
    })
  })
})

describe('gcra on Redis during an upgrade', () => {
  it('reads a TAT stored as whole ms by earlier versions (no remainder) as that exact time', async () => {
    const now = Math.floor(Date.now() / 1000) * 1000 + 2000 + 123
    const prefix = testPrefix('gcra-upgrade')
    // Earlier versions stored a bare, rounded-up TAT: here a full bucket of 3 per second.
    await suite.client().set(`${prefix}{c}:gcra`, String(now + 1000), 'PX', 5000)
    const limiter = new Limiter({
      max: 3,
      algorithm: 'gcra',
      store: new RedisStore({ client: suite.client(), timeout: '2s' }),
      prefix,
      clock: () => now,
    })
    const refused = await limiter.consume('c')
    expect([refused.allowed, refused.retryAfterMs]).toEqual([false, 334])
  })
})
