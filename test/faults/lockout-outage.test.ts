import { randomUUID } from 'node:crypto'
import { type Decision, Limiter, RedisStore } from '@tollgate/core'
import { testServers } from '../harness/servers'
import { ownRedis } from './support'

// blockDuration on Redis reads the client's block key before it counts. While Redis stalls, that read
// used to be sent on every request, past the open circuit: each decision waited out the store's
// deadline (51 ms of a 50 ms deadline, every request), and the first one waited out two (the read's,
// then the count's). With the circuit open the read is skipped now, and a failed read opens it.
const DEADLINE_MS = 200
const REQUESTS = 20

/** Each decision, with the limiter's own time for it, measured in this process. */
async function timed(limiter: Limiter, key: string): Promise<{ ms: number; decision: Decision }> {
  const started = performance.now()
  const decision = await limiter.consume(key)
  return { ms: performance.now() - started, decision }
}

describe.each(testServers())('on $name', (server) => {
  const redis = ownRedis(server)

  it('with Redis stalled, a lockout limiter waits out the deadline once, not on every request', async () => {
    const limiter = new Limiter({
      max: 3,
      window: '1 minute',
      blockDuration: '10 minutes',
      store: new RedisStore({ client: redis.client, timeout: DEADLINE_MS }),
      prefix: `lockout-outage-${randomUUID()}:`,
      logger: redis.logger,
    })
    const errors: unknown[] = []
    limiter.on('storeError', (e) => errors.push(e))
    // Before the stall: counted in Redis, and one client blocked there.
    expect((await timed(limiter, 'alice')).decision.source).toBe('store')
    for (let i = 0; i < 3; i++) await limiter.consume('mallory')
    expect(await limiter.consume('mallory')).toMatchObject({ allowed: false })

    redis.server.freeze()
    try {
      const first = await timed(limiter, 'alice')
      const rest: Array<{ ms: number; decision: Decision }> = []
      for (let i = 0; i < REQUESTS; i++) rest.push(await timed(limiter, i % 2 === 0 ? 'alice' : 'bob'))
      const blocked = await timed(limiter, 'mallory')

      // The first decision waits out one deadline (the block read's), not two: the failed read opened
      // the circuit, so the count after it went to the fallback at once. Generous margin for a loaded machine.
      expect(first.decision.source).toBe('fallback')
      expect(first.ms).toBeGreaterThanOrEqual(DEADLINE_MS - 5)
      expect(first.ms).toBeLessThan(DEADLINE_MS * 1.6)
      // While the circuit is open (1 s after the failure), no decision asks the stalled store: each comes
      // from the fallback, or from a block this process set (alice's and bob's, once over their max).
      expect(new Set(rest.map((r) => r.decision.source))).toEqual(new Set(['fallback', 'cache']))
      const slow = rest.filter((r) => r.ms >= DEADLINE_MS / 2)
      expect(slow.map((r) => Math.round(r.ms))).toEqual([])
      // The fallback continued alice's count from Redis's: 1 before the stall and 1 at its start, so her
      // next request is her 3rd of 3 and the one after it starts her block.
      const alice = rest.filter((r) => r.decision.key.includes('alice')).map((r) => r.decision.allowed)
      expect(alice).toEqual([true, ...Array(9).fill(false)])
      // A block this process set before the stall still holds, with no store call.
      expect(blocked.decision).toMatchObject({ allowed: false, source: 'cache' })
      expect(blocked.ms).toBeLessThan(DEADLINE_MS / 2)
      // The stall is reported (the block writes of alice and bob may still be waiting on it), and the
      // node logged down once, not once per request.
      expect(errors.length).toBeGreaterThanOrEqual(1)
      expect(redis.logs.filter((m) => m.includes('the store failed'))).toHaveLength(1)
    } finally {
      redis.server.thaw()
    }
  }, 20_000)

  it('with Redis stalled, peek answers a block this process set with no store call, and a reset client starts over in the fallback', async () => {
    // `limits` takes the script path, whose answers are mirrored into the fallback store as they come.
    const limiter = new Limiter({
      limits: [{ max: 3, window: '1 minute' }],
      blockDuration: '10 minutes',
      store: new RedisStore({ client: redis.client, timeout: DEADLINE_MS }),
      prefix: `lockout-reset-outage-${randomUUID()}:`,
      logger: redis.logger,
    })
    limiter.on('storeError', () => {})
    for (const key of ['mallory', 'trudy']) {
      for (let i = 0; i < 3; i++) await limiter.consume(key)
      expect(await limiter.consume(key)).toMatchObject({ allowed: false, source: 'store' })
    }
    await limiter.reset('mallory')

    redis.server.freeze()
    try {
      expect((await limiter.consume('alice')).source).toBe('fallback') // the failed block read opens the circuit
      const started = performance.now()
      const peeked = await limiter.peek('trudy')
      expect(performance.now() - started).toBeLessThan(DEADLINE_MS / 2)
      expect(peeked).toMatchObject({ allowed: false, remaining: 0, source: 'cache' })
      expect(peeked.retryAfterMs).toBeGreaterThan(9 * 60_000)
      expect(peeked.resetAt - peeked.at).toBe(peeked.retryAfterMs)
      // Neither the block nor the count that started it outlives the reset in this process: the
      // fallback gives mallory a full quota.
      const mallory: Array<[boolean, string]> = []
      for (let i = 0; i < 4; i++) {
        const d = await limiter.consume('mallory')
        mallory.push([d.allowed, d.source])
      }
      expect(mallory).toEqual([
        [true, 'fallback'],
        [true, 'fallback'],
        [true, 'fallback'],
        [false, 'fallback'],
      ])
    } finally {
      redis.server.thaw()
    }
  }, 20_000)
})
