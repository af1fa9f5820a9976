import { randomUUID } from 'node:crypto'
import { type Decision, Limiter, RedisStore } from '@tollgate/core'
import { testServers } from '../harness/servers'
import { clockInOneWindow, sleep } from '../support/time'
import { ownRedis } from './support'

// One process, one limiter, a Redis stall longer than the store
// deadline. Every client already has 8 of its 10 when Redis stops answering for 120 ms; across the
// stall, the fallback and the return to Redis, no client may be admitted more than 10 times in the
// window. A fallback that starts counting from zero admits 10 more (18 of max 10 were measured).
const CLIENTS = 20
const MAX = 10
const BEFORE_STALL = 8
const STALL_MS = 120
// Long enough after SIGCONT for the circuit (open 1 s after the last failure) to close and for
// decisions to come from Redis again, which is where a double count would show.
const AFTER_STALL_MS = 1500
// Each client sends its next request this long after the last decision, so each keeps asking
// during the stall and after it.
const PACE_MS = 10
// Bounds on the loops, whatever the timing: requests per client, and wall time.
const MAX_REQUESTS_PER_CLIENT = 400
const MAX_LOOP_MS = 10_000
const WINDOW_MS = 60_000

// The client keeps its request defaults (offline queue on, retries), as in redis-outage.test.ts.
interface Seen {
  client: number
  allowed: boolean
  source: Decision['source']
  count: number
  phase: 'before' | 'stall' | 'after'
}

describe.each(testServers())('on $name', (server) => {
  const redis = ownRedis(server)

  it(`after a ${STALL_MS} ms Redis stall, no client is admitted more than its max in one process (${CLIENTS} clients at ${BEFORE_STALL} of ${MAX})`, async () => {
    const limiter = new Limiter({
      max: MAX,
      window: WINDOW_MS,
      prefix: `stall-${randomUUID()}:`,
      // Defaults under test: a 50 ms deadline and onStoreError "fallback".
      store: new RedisStore({ client: redis.client }),
      clock: clockInOneWindow(WINDOW_MS),
      logger: redis.logger,
    })
    const events = { fallback: 0, recover: 0 }
    limiter.on('fallback', () => events.fallback++)
    limiter.on('recover', () => events.recover++)
    const seen: Seen[] = []
    let phase: Seen['phase'] = 'before'
    const decide = async (i: number) => {
      const d = await limiter.consume(`client-${i}`)
      seen.push({ client: i, allowed: d.allowed, source: d.source, count: d.count, phase })
    }

    // Every client at 8 of 10, counted by Redis.
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, i) => {
        for (let n = 0; n < BEFORE_STALL; n++) await decide(i)
      }),
    )
    const before = seen.filter((s) => s.allowed && s.source === 'store').length
    // The scenario needs every client at 8 when the stall begins; on a machine too slow for a 50 ms
    // deadline even without a stall, this says so instead of failing on the count.
    expect(before).toBe(CLIENTS * BEFORE_STALL)

    // The stall, with every client still sending; then Redis again.
    redis.server.freeze()
    phase = 'stall'
    let stopAt = Number.POSITIVE_INFINITY
    const loopsEnd = performance.now() + MAX_LOOP_MS
    const loops = Array.from({ length: CLIENTS }, async (_, i) => {
      for (let n = 0; n < MAX_REQUESTS_PER_CLIENT && performance.now() < Math.min(stopAt, loopsEnd); n++) {
        await decide(i)
        await sleep(PACE_MS)
      }
    })
    try {
      await sleep(STALL_MS)
    } finally {
      redis.server.thaw()
    }
    phase = 'after'
    stopAt = performance.now() + AFTER_STALL_MS
    await Promise.all(loops)

    const admitted = new Map<number, number>()
    const bySource: Record<string, number> = {}
    for (const s of seen) {
      if (!s.allowed) continue
      admitted.set(s.client, (admitted.get(s.client) ?? 0) + 1)
      const tag = `${s.phase}:${s.source}`
      bySource[tag] = (bySource[tag] ?? 0) + 1
    }
    const counts = [...admitted.values()]
    console.info(
      'stall:',
      JSON.stringify({
        decisions: seen.length,
        admittedPerClient: { min: Math.min(...counts), max: Math.max(...counts) },
        admittedBySource: bySource,
        events,
      }),
    )
    // The stall was real: the fallback decided, and Redis decided again after it.
    expect(events.fallback).toBeGreaterThan(0)
    expect(events.recover).toBeGreaterThanOrEqual(1)
    expect(seen.some((s) => s.phase === 'after' && s.source === 'store')).toBe(true)
    // No client over its max in the window, in this one process.
    const overMax = Object.fromEntries([...admitted].filter(([, n]) => n > MAX).map(([i, n]) => [`client-${i}`, n]))
    expect(overMax).toEqual({})
  })
})
