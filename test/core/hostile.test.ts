import { createServer } from 'node:http'
import { type Decision, Limiter, type Logger, MemoryStore } from '@tollgate/core'
import { rateLimit } from '@tollgate/express'
import express from 'express'
import request from 'supertest'

function recorder() {
  const lines: string[] = []
  const logger: Logger = { warn: (m) => void lines.push(m), error: (m) => void lines.push(m) }
  return { logger, lines }
}

describe('hostile clients', () => {
  function app(trust: string | boolean | undefined, max = 1) {
    const { logger, lines } = recorder()
    const a = express()
    if (trust !== undefined) a.set('trust proxy', trust)
    // A clock that stands still in the middle of a minute: a test's requests never straddle a window's edge.
    const now = Math.floor(Date.now() / 60_000) * 60_000 + 30_000
    a.use(rateLimit({ max, window: '1 minute', logger, ipv6Subnet: 64, clock: () => now }))
    a.get('/', (req, res) => {
      res.send(req.rateLimit?.key)
    })
    return { agent: request(createServer(a)), lines }
  }

  it('cannot change its key with a spoofed X-Forwarded-For unless proxies are trusted (and is warned about once)', async () => {
    const { agent, lines } = app(undefined)
    await agent.get('/').set('X-Forwarded-For', '203.0.113.1').expect(200)
    for (let i = 2; i < 6; i++) await agent.get('/').set('X-Forwarded-For', `203.0.113.${i}`).expect(429)
    expect(lines.filter((l) => l.includes('X-Forwarded-For'))).toHaveLength(1)
  })

  it('warns once when every proxy is trusted, since then any client picks its own IP', async () => {
    const { agent, lines } = app(true, 100)
    for (let i = 0; i < 3; i++) await agent.get('/').set('X-Forwarded-For', `203.0.113.${i}`).expect(200)
    expect(lines.filter((l) => l.includes('"trust proxy" is true'))).toHaveLength(1)
  })

  it('stays in one bucket while rotating addresses inside one IPv6 /64', async () => {
    const { agent } = app('loopback')
    const first = await agent.get('/').set('X-Forwarded-For', '2001:db8:1:2:aaaa::1').expect(200)
    expect(first.text).toBe('2001:db8:1:2::/64')
    for (const ip of ['2001:db8:1:2::2', '2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:db8:1:2:1234:5678:9abc:def0']) {
      const refused = await agent.get('/').set('X-Forwarded-For', ip).expect(429)
      expect(refused.headers['retry-after']).toBeDefined()
    }
    await agent.get('/').set('X-Forwarded-For', '2001:db8:1:3::1').expect(200) // the next /64 is someone else
  })

  it('never merges distinct IPv4 clients that arrive as IPv4-mapped IPv6', async () => {
    const { agent } = app('loopback')
    const keys = []
    for (const ip of ['::ffff:198.51.100.1', '::ffff:198.51.100.2', '::ffff:198.51.101.1', '::ffff:10.0.0.1']) {
      keys.push((await agent.get('/').set('X-Forwarded-For', ip).expect(200)).text)
    }
    expect(keys).toEqual(['198.51.100.1', '198.51.100.2', '198.51.101.1', '10.0.0.1'])
    await agent.get('/').set('X-Forwarded-For', '198.51.100.1').expect(429) // same client, either family
  })

  it('cannot blow up store keys with an enormous key', async () => {
    const seen: string[] = []
    class SpyStore extends MemoryStore {
      override increment(key: string, cost: number, windowMs: number, now: number): number {
        seen.push(key)
        return super.increment(key, cost, windowMs, now)
      }
    }
    const limiter = new Limiter<{ user: string }>({ key: (r) => r.user, store: new SpyStore({ sweepIntervalMs: 0 }) })
    limiter.check({ user: `${'é'.repeat(1_000_000)}{}` })
    expect(seen[0]!.length).toBeLessThan(80)
    expect(seen[0]).toMatch(/^tg:\{#[A-Za-z0-9_-]{43}\}$/)
  })
})

describe('memory store under key churn', () => {
  it('frees 200,000 unique client entries after the window, without resetting an existing client', () => {
    let now = 1_800_000_000_000
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    const limiter = new Limiter<{ k: string }>({ max: 5, window: '10s', store, clock: () => now, key: (r) => r.k })
    for (let i = 0; i < 3; i++) limiter.check({ k: 'steady' })
    for (let i = 0; i < 200_000; i++) {
      now += i % 1000 === 0 ? 1 : 0
      limiter.check({ k: `churn-${i}` })
    }
    expect(store.size).toBe(200_001)
    expect((limiter.check({ k: 'steady' }) as Decision).count).toBe(4) // not reset by the flood
    now += 10_000
    store.prune(now)
    expect(store.size).toBe(0)
  })
})

describe('misconfiguration warnings', () => {
  it('warns once when two limiters share one prefix on one store', () => {
    const { logger, lines } = recorder()
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    new Limiter({ store, logger })
    expect(lines).toEqual([])
    new Limiter({ store, logger })
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/share the prefix "tg:"/)
    new Limiter({ store, logger, prefix: 'tg:login:' })
    expect(lines).toHaveLength(1)
  })
})
