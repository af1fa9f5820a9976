import { randomUUID } from 'node:crypto'
import { RedisStore } from '@tollgate/core'
import type { LeaseRequest, LimitSpec } from '@tollgate/core/store'
import { Redis } from 'ioredis'
import { keysWithoutTtl, quitClient, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// The grant math of the `lease` option against a real Redis (algorithms/leases.ts): never more than is
// left, slices that shrink with what is left and with the number of lessees, every key with a TTL,
// unspent units given back, and an ACL user restricted to the prefix.

const db = useRedis()
const W = 60_000
const NOW = Math.floor(Date.now() / W) * W + 1000

function limit(max: number, burst = max): LimitSpec {
  return { max, windowMs: W, burst, label: '1m', policy: { name: `${max}-per-1m`, limit: max, windowMs: W } }
}

function request(stem: string, max: number, asked: number, owner: string, over: Partial<LeaseRequest> = {}): LeaseRequest {
  return { algorithm: 'fixed-window', stem, limit: limit(max), now: NOW, asked, maxShare: 0.5, held: 0, adjust: 0, owner, ...over }
}

describe('fixed window leases', () => {
  it('grants min(asked, left × maxShare / lessees), counted into the window key, and never more than is left', async () => {
    const store = new RedisStore({ client: db.client, timeout: '2s' })
    const prefix = testPrefix('lease')
    const stem = `${prefix}{k}`
    const a = await store.lease(request(stem, 100, 1000, 'a'))
    expect(a).toEqual({ granted: 50, left: 50, lessees: 1, restarted: false, waitMs: 0 })
    const b = await store.lease(request(stem, 100, 1000, 'b'))
    // Two lessees now: half of 50, split in two.
    expect(b).toEqual({ granted: 12, left: 38, lessees: 2, restarted: false, waitMs: 0 })
    const small = await store.lease(request(stem, 100, 3, 'a', { held: 50 }))
    expect(small.granted).toBe(3)
    expect(Number(await db.client.get(`${stem}:${Math.floor(NOW / W)}`))).toBe(65)
    // Slices shrink to one unit near the limit, then nothing: the total granted is exactly max.
    let total = 65
    for (let i = 0; i < 200; i++) {
      const g = await store.lease(request(stem, 100, 1000, i % 2 === 0 ? 'a' : 'b', { held: 1 }))
      total += g.granted
      if (g.granted === 0) break
    }
    expect(total).toBe(100)
    expect(Number(await db.client.get(`${stem}:${Math.floor(NOW / W)}`))).toBe(100)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })

  it('gives back unspent units once, never below zero, and drops the lessee', async () => {
    const store = new RedisStore({ client: db.client, timeout: '2s' })
    const stem = `${testPrefix('lease')}{k}`
    const key = `${stem}:${Math.floor(NOW / W)}`
    await store.lease(request(stem, 100, 40, 'a'))
    await store.lease(request(stem, 100, 10, 'b'))
    expect(await db.client.get(`${key}:lessees`)).toBe('2')
    await store.endLease(request(stem, 100, 0, 'a'), 30)
    expect(Number(await db.client.get(key))).toBe(20)
    expect(await db.client.get(`${key}:lessees`)).toBe('1')
    expect(await db.client.get(`${key}:lessee:a`)).toBeNull()
    // A second give-back under no marker changes nothing.
    await store.endLease(request(stem, 100, 0, 'a'), 30)
    expect(Number(await db.client.get(key))).toBe(20)
    await store.endLease(request(stem, 100, 0, 'b'), 500)
    expect(Number(await db.client.get(key))).toBe(0)
  })

  it('after a loss of the key (marker gone while held), grants nothing and puts the held units back into the count', async () => {
    const store = new RedisStore({ client: db.client, timeout: '2s' })
    const stem = `${testPrefix('lease')}{k}`
    const key = `${stem}:${Math.floor(NOW / W)}`
    await store.lease(request(stem, 100, 30, 'a'))
    await db.client.del(key, `${key}:lessees`, `${key}:lessee:a`)
    const g = await store.lease(request(stem, 100, 30, 'a', { held: 30 }))
    expect(g).toMatchObject({ granted: 0, restarted: true })
    expect(Number(await db.client.get(key))).toBe(30)
  })

  it('keeps saying the key was lost to a process that never got that reply, without putting its units back twice', async () => {
    // The client resent the process's call after Redis came back, and the call ran there, but its reply
    // came after the process's deadline: the process asks again still holding its units.
    const store = new RedisStore({ client: db.client, timeout: '2s' })
    const stem = `${testPrefix('lease')}{k}`
    const key = `${stem}:${Math.floor(NOW / W)}`
    await store.lease(request(stem, 100, 30, 'a'))
    await db.client.del(key, `${key}:lessees`, `${key}:lessee:a`)
    await store.lease(request(stem, 100, 30, 'a', { held: 30 })) // the reply the process never read
    const again = await store.lease(request(stem, 100, 30, 'a', { held: 30 }))
    expect(again).toMatchObject({ granted: 0, restarted: true })
    expect(Number(await db.client.get(key))).toBe(30)
    // Once the process holds nothing (it refused the key meanwhile), it leases again.
    const later = await store.lease(request(stem, 100, 30, 'a'))
    expect(later).toMatchObject({ granted: 30, restarted: false })
    expect(Number(await db.client.get(key))).toBe(60)
    expect(await keysWithoutTtl(db.client, stem)).toEqual([])
  })

  it('adds units admitted off-book before granting', async () => {
    const store = new RedisStore({ client: db.client, timeout: '2s' })
    const stem = `${testPrefix('lease')}{k}`
    const g = await store.lease(request(stem, 100, 1000, 'a', { adjust: 60 }))
    expect(g).toEqual({ granted: 20, left: 20, lessees: 1, restarted: false, waitMs: 0 })
  })
})

describe('GCRA leases', () => {
  it('moves the TAT on by the units granted, within the burst, and says when a unit fits again', async () => {
    const store = new RedisStore({ client: db.client, timeout: '2s' })
    const prefix = testPrefix('lease-gcra')
    const stem = `${prefix}{k}`
    const gcra = (asked: number, owner: string, over: Partial<LeaseRequest> = {}) =>
      store.lease(request(stem, 60, asked, owner, { algorithm: 'gcra', ...over }))
    expect(await gcra(100, 'a')).toEqual({ granted: 30, left: 30, lessees: 1, restarted: false, waitMs: 0 })
    let total = 30
    for (let i = 0; i < 100; i++) {
      const g = await gcra(100, 'a', { held: 1 })
      total += g.granted
      if (g.granted === 0) {
        // 60 per minute: one unit every second.
        expect(g.waitMs).toBe(1000)
        break
      }
    }
    expect(total).toBe(60)
    // Units given back move the TAT back: they can be granted again.
    await store.endLease(request(stem, 60, 0, 'a', { algorithm: 'gcra' }), 10)
    expect((await gcra(100, 'a')).granted).toBe(5)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })
})

describe('a least-privilege user', () => {
  it.each([
    ['~prefix:* +@all', ['+@all']],
    [
      'the documented commands',
      [
        '+get',
        '+set',
        '+incrby',
        '+pexpire',
        '+decrby',
        '+del',
        '+exists',
        '+type',
        '+multi',
        '+exec',
        '+eval',
        '+evalsha',
        '+hget',
        '+hmget',
        '+hset',
        '+hincrby',
      ],
    ],
  ])('leases and gives back with %s', async (_name, commands) => {
    const prefix = testPrefix('lease-acl')
    const user = `lease-${randomUUID().slice(0, 8)}`
    await db.client.call('ACL', 'SETUSER', user, 'on', '>pw', 'resetkeys', `~${prefix}*`, ...commands)
    const opts = db.client.options
    const client = new Redis({
      host: opts.host,
      port: opts.port,
      username: user,
      password: 'pw',
      disconnectTimeout: 0,
      enableReadyCheck: false,
    })
    try {
      const store = new RedisStore({ client, timeout: '2s' })
      const stem = `${prefix}{k}`
      expect((await store.lease(request(stem, 10, 4, 'a'))).granted).toBe(4)
      expect((await store.lease(request(stem, 10, 4, 'a', { algorithm: 'gcra' }))).granted).toBe(4)
      await store.endLease(request(stem, 10, 0, 'a'), 4)
      expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
    } finally {
      await quitClient(client)
      await db.client.call('ACL', 'DELUSER', user)
    }
  })
})
