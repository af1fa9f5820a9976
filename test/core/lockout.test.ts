import { Limiter } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// blockDuration: once over its limit, a client is refused for the block's length from its first
// refusal, whatever the window; the block is a key of the store (so every process honours it).

const db = useRedis()

const stores = db.stores()
const MINUTE = 60_000

describe.each(stores)('blockDuration on the %s store', (_name, makeStore) => {
  it('locks a client out for 15 minutes after 5 failed logins, whatever the window', async () => {
    let now = 1_800_000_000_000 + 5_000
    const options = {
      max: 5,
      window: '1m',
      blockDuration: '15m',
      store: makeStore(),
      prefix: testPrefix('lockout'),
      clock: () => now,
    } as const
    const limiter = new Limiter(options)
    for (let i = 0; i < 5; i++) expect((await limiter.consume('alice')).allowed).toBe(true)
    const sixth = await limiter.consume('alice')
    expect(sixth).toMatchObject({ allowed: false, retryAfterMs: 15 * MINUTE, resetAt: now + 15 * MINUTE })
    now += 10 * MINUTE // many windows later: still blocked
    expect(await limiter.consume('alice')).toMatchObject({ allowed: false, retryAfterMs: 5 * MINUTE })
    expect((await limiter.consume('bob')).allowed).toBe(true) // others unaffected
    now += 5 * MINUTE + 1
    expect((await limiter.consume('alice')).allowed).toBe(true)

    // Another limiter (another process) sharing the store honours the block it did not set.
    const other = new Limiter({ ...options, store: options.store })
    for (let i = 0; i < 5; i++) await limiter.consume('carol')
    await limiter.consume('carol') // blocked from here
    now += 2 * MINUTE
    expect(await other.consume('carol')).toMatchObject({ allowed: false, retryAfterMs: 13 * MINUTE })
  })

  it('never counts successful logins when they are refunded', async () => {
    let now = 1_800_000_000_000 + 5_000
    const limiter = new Limiter({
      max: 5,
      window: '1m',
      blockDuration: '15m',
      store: makeStore(),
      prefix: testPrefix('lockout-ok'),
      clock: () => now,
    })
    for (let i = 0; i < 20; i++) {
      const d = await limiter.consume('dave')
      expect(d.allowed).toBe(true)
      await limiter.refund(d) // a successful login gives its unit back
      now += 100
    }
  })
})
