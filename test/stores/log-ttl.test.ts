import { Limiter, RedisStore } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// The sorted-set algorithms (sliding log, concurrency) move a log's TTL once per period of the window, at
// the period's first admission, to two periods ahead plus the margin, and keep that period in the log as a
// marker member (algorithms/sliding-log.ts). What the user's Redis sees: every log has a TTL that covers its
// newest entry's window, the hot log runs no PEXPIRE per admission, and a log an earlier version wrote,
// without a marker, is counted exactly (an admission counts the entries in the window, never the marker).

const db = useRedis({ nodeRedis: true })
const W = 10_000
const MARGIN = 1000

function limiterAt(prefix: string, algorithm: 'sliding-log' | 'concurrency', max: number, clock: { now: number }, kind: string) {
  return new Limiter({
    algorithm,
    max,
    window: W,
    prefix,
    clock: () => clock.now,
    store: new RedisStore({ client: kind === 'ioredis' ? db.client : db.nodeRedis, timeout: '2s' }),
  })
}

async function pexpires(): Promise<number> {
  const stats = await db.client.info('commandstats')
  return Number(/cmdstat_pexpire:calls=(\d+)/.exec(stats)?.[1] ?? 0)
}

/** A period's start, a few windows ahead of now: the clock the limiter is given starts there. */
const periodAhead = () => (Math.floor(Date.now() / W) + 6) * W

/** Rewrites `key` as an earlier version wrote a log: `entries` scored from `start`, 10 ms apart, a TTL, no marker. */
async function legacyLog(key: string, start: number, entries: number): Promise<void> {
  await db.client.del(key)
  const members = Array.from({ length: entries }, (_, n) => [start + 10 * n, `old:${n + 1}:1`]).flat()
  await db.client.zadd(key, ...members)
  await db.client.pexpire(key, W + MARGIN)
}

describe.each(['ioredis', 'node-redis'] as const)('through %s', (kind) => {
  it.each(['sliding-log', 'concurrency'] as const)(
    '%s: the TTL covers the newest entry, moves once per window period, and an entry is counted once',
    async (algorithm) => {
      const prefix = testPrefix(`log-ttl-${algorithm}`)
      // A period starts at a multiple of W; the clock runs ahead of Redis's, which sets the TTL from now.
      const start = periodAhead()
      const clock = { now: start + 100 }
      const limiter = limiterAt(prefix, algorithm, 1000, clock, kind)
      await limiter.consume('c')
      const [key] = await db.client.keys(`${prefix}*`)
      // First admission of the period: two periods ahead plus the margin, from the call's clock.
      let ttl = await db.client.pttl(key!)
      expect(ttl).toBeGreaterThan(2 * W + MARGIN - 100 - 1000)
      expect(ttl).toBeLessThanOrEqual(2 * W + MARGIN - 100)
      const before = await pexpires()
      let last = await limiter.consume('c')
      for (let i = 0; i < 20; i++) {
        clock.now = start + 200 + i * 100
        last = await limiter.consume('c')
        expect(last.allowed).toBe(true)
      }
      // The rest of the period: no PEXPIRE, the TTL as the first admission set it, one entry per admission.
      expect((await pexpires()) - before).toBe(0)
      ttl = await db.client.pttl(key!)
      expect(ttl).toBeLessThanOrEqual(2 * W + MARGIN - 100)
      expect(last.remaining).toBe(1000 - 22)
      // The next period's first admission moves it on, once.
      clock.now = start + W + 50
      await limiter.consume('c')
      expect((await pexpires()) - before).toBe(1)
      ttl = await db.client.pttl(key!)
      expect(ttl).toBeGreaterThan(2 * W + MARGIN - 50 - 1000)
      expect(ttl).toBeLessThanOrEqual(2 * W + MARGIN - 50)
      await limiter.reset('c')
      expect(await db.client.keys(`${prefix}*`)).toEqual([])
      await limiter.close()
    },
  )

  it('sliding-log: an entry that left the window is not counted, and leaves the log at the next period', async () => {
    const prefix = testPrefix('log-trim')
    const start = periodAhead()
    const clock = { now: start + 100 }
    const limiter = limiterAt(prefix, 'sliding-log', 2, clock, kind)
    expect(await limiter.consume('c')).toMatchObject({ allowed: true, remaining: 1 })
    const [key] = await db.client.keys(`${prefix}*`)
    // The next period's first admission removes the entries that left the window: none yet.
    clock.now = start + W + 50
    expect(await limiter.consume('c')).toMatchObject({ allowed: true, remaining: 0 })
    expect(await limiter.consume('c')).toMatchObject({ allowed: false })
    expect(await db.client.zcard(key!)).toBe(3)
    // The first entry left the window: not counted, though the log holds it until the next period.
    clock.now = start + W + 150
    expect(await limiter.consume('c')).toMatchObject({ allowed: true, remaining: 0 })
    expect(await db.client.zcard(key!)).toBe(4)
    // The next period's first admission: the first two entries have left, and leave the log.
    clock.now = start + 2 * W + 100
    expect(await limiter.consume('c')).toMatchObject({ allowed: true, remaining: 0 })
    expect(await db.client.zrangebyscore(key!, 0, '+inf')).toHaveLength(2)
    expect(await db.client.zcard(key!)).toBe(3)
    await limiter.reset('c')
    await limiter.close()
  })

  it('counts a log an earlier version wrote (entries, no marker) exactly: max of them leave no room', async () => {
    const prefix = testPrefix('log-legacy')
    const start = periodAhead()
    const clock = { now: start + 100 }
    const limiter = limiterAt(prefix, 'sliding-log', 3, clock, kind)
    // Learn the key, then write it as an earlier version did: three entries, a TTL, no marker.
    await limiter.consume('c')
    const [key] = await db.client.keys(`${prefix}*`)
    await legacyLog(key!, start, 3)
    clock.now = start + 500
    const refused = await limiter.consume('c')
    expect(refused).toMatchObject({ allowed: false, remaining: 0 })
    // The refused call wrote nothing: the log is as the earlier version left it, its three entries counted.
    expect(await db.client.zcard(key!)).toBe(3)
    expect(await db.client.zscore(key!, 'old:1:1')).toBe(String(start))
    clock.now = start + W + 1
    // The first entry left the window: room for one.
    expect(await limiter.consume('c')).toMatchObject({ allowed: true, remaining: 0 })
    expect(await limiter.consume('c')).toMatchObject({ allowed: false })
    await limiter.reset('c')
    await limiter.close()
  })

  it('with two limits, a full log of an earlier version refuses the call, and the other limit keeps none of it', async () => {
    const prefix = testPrefix('log-legacy-limits')
    const start = periodAhead()
    const clock = { now: start + 100 }
    const limiter = new Limiter({
      algorithm: 'sliding-log',
      // The second limit's log is full: the call is refused before either log is written.
      limits: [
        { max: 100, window: W * 6 },
        { max: 3, window: W },
      ],
      prefix,
      clock: () => clock.now,
      store: new RedisStore({ client: kind === 'ioredis' ? db.client : db.nodeRedis, timeout: '2s' }),
    })
    await limiter.consume('c')
    const keys = (await db.client.keys(`${prefix}*`)).sort()
    expect(keys).toHaveLength(2)
    // The 3-per-W limit's key (labelled by its window), rewritten as an earlier version's: three entries, no marker.
    const small = keys.find((k) => k.endsWith(':10s:log'))!
    const large = keys.find((k) => k !== small)!
    await db.client.del(large)
    await legacyLog(small, start, 3)
    clock.now = start + 500
    expect(await limiter.consume('c')).toMatchObject({ allowed: false })
    // The call was refused before any write: neither log holds anything of it.
    expect(await db.client.zrange(small, 0, -1)).toEqual(['old:1:1', 'old:2:1', 'old:3:1'])
    expect(await db.client.exists(large)).toBe(0)
    await limiter.reset('c')
    await limiter.close()
  })

  it('a log an earlier version wrote with room left admits, counting its entries', async () => {
    const prefix = testPrefix('log-legacy-room')
    const start = periodAhead()
    const clock = { now: start + 100 }
    const limiter = limiterAt(prefix, 'sliding-log', 3, clock, kind)
    await limiter.consume('c')
    const [key] = await db.client.keys(`${prefix}*`)
    await legacyLog(key!, start, 1)
    clock.now = start + 500
    expect(await limiter.consume('c')).toMatchObject({ allowed: true, remaining: 1 })
    expect(await limiter.consume('c')).toMatchObject({ allowed: true, remaining: 0 })
    expect(await limiter.consume('c')).toMatchObject({ allowed: false })
    await limiter.reset('c')
    await limiter.close()
  })
})
