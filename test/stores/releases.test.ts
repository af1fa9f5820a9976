import { Limiter, RedisStore } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// A turn's releases of concurrency slots go to a standalone Redis as plain ZREMs in the client's own
// transaction (stores/redis/removals.ts), not as a script: what the user's Redis runs, and that a release
// still frees exactly its own slot once, and that a key of another type fails its own release alone.

const db = useRedis({ nodeRedis: true })

async function commandCalls(): Promise<Record<string, number>> {
  const stats = await db.client.info('commandstats')
  const calls: Record<string, number> = {}
  for (const m of stats.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) calls[m[1]!] = Number(m[2])
  return calls
}

describe.each(['ioredis', 'node-redis'] as const)('through %s', (kind) => {
  const limiterOf = (prefix: string, max: number, storeEvents: unknown[] = []) => {
    const limiter = new Limiter({
      algorithm: 'concurrency',
      max,
      window: '1m',
      prefix,
      store: new RedisStore({ client: kind === 'ioredis' ? db.client : db.nodeRedis, timeout: '2s' }),
    })
    limiter.on('storeError', (e) => storeEvents.push(e))
    return limiter
  }

  it("frees each call's own slot, once: one transaction of ZREMs for the turn, no script", async () => {
    const prefix = testPrefix('releases')
    const limiter = limiterOf(prefix, 3)
    const held = await Promise.all(['a', 'a', 'a', 'b'].map((c) => limiter.consume(c)))
    expect(held.map((d) => d.allowed)).toEqual([true, true, true, true])
    expect((await limiter.consume('a')).allowed).toBe(false)
    const before = await commandCalls()
    await Promise.all([limiter.release(held[0]!), limiter.release(held[3]!)])
    const after = await commandCalls()
    expect((after.zrem ?? 0) - (before.zrem ?? 0)).toBe(2)
    expect((after.exec ?? 0) - (before.exec ?? 0)).toBe(1)
    expect((after.evalsha ?? 0) - (before.evalsha ?? 0)).toBe(0)
    // One slot of a's is free again, and only one; a second release of the same decision frees nothing more.
    await limiter.release(held[0]!)
    const next = await limiter.consume('a')
    expect(next).toMatchObject({ allowed: true, remaining: 0 })
    expect((await limiter.consume('a')).allowed).toBe(false)
    expect(await limiter.consume('b')).toMatchObject({ allowed: true, remaining: 2 })
    await limiter.reset('a')
    await limiter.reset('b')
    await limiter.close()
  })

  it('fails the release of a key of another type alone; the others of its turn free their slots', async () => {
    const prefix = testPrefix('releases-wrongtype')
    const events: unknown[] = []
    const limiter = limiterOf(prefix, 1, events)
    const a = await limiter.consume('a')
    const b = await limiter.consume('b')
    const keys = await db.client.keys(`${prefix}*`)
    const keyOfA = keys.find((k) => k.includes('{a}'))!
    await db.client.del(keyOfA)
    await db.client.set(keyOfA, 'not a set', 'PX', 60_000)
    await Promise.all([limiter.release(a), limiter.release(b)])
    expect(events).toEqual([
      expect.objectContaining({ code: 'TG_STORE_ERROR', message: expect.stringMatching(/refund of .*\{a\}: WRONGTYPE/) }),
    ])
    // b's slot is free; a's key was left as it was.
    expect((await limiter.consume('b')).allowed).toBe(true)
    expect(await db.client.get(keyOfA)).toBe('not a set')
    await db.client.del(keyOfA)
    await limiter.reset('b')
    await limiter.close()
  })
})
