import { Limiter, TollgateError } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// `window` as a function of the request (per-tier windows): each tier is limited by its own window,
// and two windows of one client never share a count.

const db = useRedis()

type Req = { tier: string; ip: string }
const stores = db.stores()

describe.each(stores)('a window function on the %s store', (_name, makeStore) => {
  for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
    it(`${algorithm}: limits each tier by its own window, the same client apart per window`, async () => {
      let now = 1_800_000_000_000 // on a minute's edge
      const limiter = new Limiter<Req>(
        {
          algorithm,
          max: 2,
          window: (r) => (r.tier === 'pro' ? '1s' : '1m'),
          store: makeStore(),
          prefix: testPrefix('tiers'),
          clock: () => now,
        },
        { ip: (r) => r.ip },
      )
      const send = async (tier: string) => (await limiter.check({ tier, ip: '192.0.2.1' }))!
      expect([(await send('pro')).allowed, (await send('pro')).allowed, (await send('pro')).allowed]).toEqual([true, true, false])
      // The same client on the other tier counts in its own window, from zero.
      const free = [await send('free'), await send('free'), await send('free')]
      expect(free.map((d) => d.allowed)).toEqual([true, true, false])
      // The free tier's wait is a minute's (the sliding window also weighs the minute before).
      expect(free[2]!.retryAfterMs).toBe(algorithm === 'fixed-window' ? 60_000 : 90_000)
      now += algorithm === 'fixed-window' ? 1000 : 2000 // past the pro tier's window (and, sliding, the one before)
      expect((await send('pro')).allowed).toBe(true)
      expect((await send('free')).allowed).toBe(false) // still the same minute
      expect((await send('pro')).policy.name).toBe('2-per-1s')
      expect((await send('free')).policy.name).toBe('2-per-1m')
    })
  }
})

it('hands a window function that returns no duration to the error handler, naming it', () => {
  const logger = { warn() {}, error() {} }
  const limiter = new Limiter<Req>({ window: () => 'soon' as never, logger }, { ip: (r) => r.ip })
  let thrown: unknown
  try {
    limiter.check({ tier: 'x', ip: '192.0.2.1' })
  } catch (error) {
    thrown = error
  }
  expect(thrown).toBeInstanceOf(TollgateError)
  expect((thrown as TollgateError).message).toMatch(/Option "window" returned "soon" \(string\), expected a duration/)
})
