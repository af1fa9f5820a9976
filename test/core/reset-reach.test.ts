import { type Decision, Limiter, type LimiterOptions, RedisStore } from '@tollgate/core'
import type { Redis } from 'ioredis'
import { newRedisClient, quitClient, testPrefix } from '../harness/redis'
import { testClock } from '../support/time'

// `reset` in one process reaches the refusals another process keeps (the over-limit cache of the
// fixed window, a lease's empty slice) within a second, as the reference says, and until then a flood
// there costs the store one call a second. Two limiters, each with a client of its own, stand for two
// processes sharing one Redis: neither hears of the other except through Redis.

const START = 1_800_000_000_000 + 5_000 // 5 s into a 15 minute window
const quiet = { warn() {}, error() {} }
const clients: Redis[] = []
afterAll(async () => {
  await Promise.all(clients.map(quitClient))
})

function processes(options: LimiterOptions) {
  const clock = testClock(START)
  const prefix = testPrefix('reset-reach')
  const make = () => {
    const client = newRedisClient()
    clients.push(client)
    const store = new RedisStore({ client, timeout: '2s' })
    const calls = { n: 0 }
    for (const method of ['admit', 'increment', 'lease'] as const) {
      const original = store[method]?.bind(store) as ((...args: never[]) => unknown) | undefined
      if (original === undefined) continue
      ;(store as unknown as Record<string, unknown>)[method] = (...args: never[]) => {
        calls.n++
        return original(...args)
      }
    }
    const limiter = new Limiter({ max: 3, window: '15m', store, prefix, clock: clock.read, logger: quiet, ...options })
    return { limiter, calls }
  }
  return { a: make(), b: make(), clock }
}

describe.each([
  ['the fixed window (the over-limit cache)', {}],
  ['the fixed window with lease', { lease: true }],
  ['GCRA with lease', { algorithm: 'gcra', lease: true }],
] as const)('reset in another process, under %s', (_name, options) => {
  it('ends the refusal here within a second; until then a flood costs the store at most one call a second', async () => {
    const { a, b, clock } = processes(options as LimiterOptions)
    const got: Decision[] = []
    for (let i = 0; i < 5; i++) got.push(await b.limiter.consume('alice'))
    expect(got.map((d) => d.allowed)).toEqual([true, true, true, false, false])
    // B keeps refusing alice without asking, for a while.
    const before = b.calls.n
    for (let i = 0; i < 5; i++, clock.now += 100) expect((await b.limiter.consume('alice')).allowed).toBe(false)
    expect(b.calls.n - before).toBeLessThanOrEqual(1)

    await a.limiter.reset('alice')
    // Within one second of the reset, B admits alice again, decided by the store.
    let admitted: Decision | undefined
    const resetAt = clock.now
    while (clock.now <= resetAt + 1000) {
      const d = await b.limiter.consume('alice')
      if (d.allowed) {
        admitted = d
        break
      }
      clock.now += 100
    }
    expect(admitted).toBeDefined()
    expect(admitted!.source).toBe('store')
    await a.limiter.close?.()
    await b.limiter.close?.()
  })
})
