import { createServer } from 'node:http'
import { type Decision, Limiter, MemoryStore, type Store } from '@tollgate/core'
import { rateLimit } from '@tollgate/express'
import express from 'express'
import { parseList } from 'structured-headers'
import request from 'supertest'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

const db = useRedis()

const stores = db.stores()

describe.each(stores)('on the %s store', (_storeName, makeStore) => {
  it('several limits: 10/s and 20/min cut 15 requests per second at 10, then at 20 in total', async () => {
    let now = Math.floor(Date.now() / 60_000) * 60_000 + 60_000
    const limiter = new Limiter({
      limits: [
        { max: 10, window: '1s' },
        { max: 20, window: '1m' },
      ],
      store: makeStore(),
      prefix: testPrefix('multi'),
      clock: () => now,
    })
    const perSecond: number[] = []
    for (let second = 0; second < 4; second++) {
      let admitted = 0
      for (let i = 0; i < 15; i++) {
        now += 10
        if ((await limiter.consume('c')).allowed) admitted++
      }
      perSecond.push(admitted)
      now += 1000 - 150
    }
    // Had the 5 refused requests of the first second used up minute quota, the second would admit 5.
    expect(perSecond).toEqual([10, 10, 0, 0])
    const last = (await limiter.consume('c')) as Decision
    // Refused by the minute limit, so it used nothing of this second's quota either.
    expect(last.limits!.map((d) => [d.policy.name, d.remaining, d.allowed])).toEqual([
      ['10-per-1s', 10, false],
      ['20-per-1m', 0, false],
    ])
    expect(last.policy.name).toBe('20-per-1m') // the decisive one
  })

  it('peek reads without counting, reset forgets, consume takes a cost', async () => {
    for (const algorithm of ['fixed-window', 'sliding-window', 'gcra', 'sliding-log'] as const) {
      const now = Math.floor(Date.now() / 60_000) * 60_000 + 60_500
      const limiter = new Limiter({ max: 5, window: '1m', algorithm, store: makeStore(), prefix: testPrefix('api'), clock: () => now })
      expect((await limiter.consume('job', 3)).remaining).toBe(2)
      expect((await limiter.peek('job')).remaining).toBe(2)
      expect((await limiter.peek('job')).remaining).toBe(2)
      expect((await limiter.consume('job', 3)).allowed).toBe(false)
      await limiter.reset('job')
      expect({ algorithm, remaining: (await limiter.peek('job')).remaining }).toEqual({ algorithm, remaining: 5 })
      // Also forgotten by the over-limit cache, which had seen this client refused in this window.
      const after = await limiter.consume('job', 1)
      expect({ algorithm, allowed: after.allowed, source: after.source }).toEqual({ algorithm, allowed: true, source: 'store' })
    }
  })
})

describe('refunds after the response', () => {
  function loginApp(store: Store, options: { skipSuccessfulRequests?: boolean; skipFailedRequests?: boolean }) {
    const app = express()
    app.use(express.json())
    app.post('/login', rateLimit({ max: 5, window: '1 minute', store, prefix: testPrefix('login'), ...options }), (req, res) => {
      if (req.body?.password === 'right') res.json({ ok: true })
      else res.status(401).json({ ok: false })
    })
    return request(createServer(app))
  }

  it.each(stores)(
    'skipSuccessfulRequests on %s: 100 successful logins do not count, the 6th failed one gets 429',
    async (_n, makeStore) => {
      const agent = loginApp(makeStore(), { skipSuccessfulRequests: true })
      for (let i = 0; i < 100; i++) await agent.post('/login').send({ password: 'right' }).expect(200)
      for (let i = 0; i < 5; i++) await agent.post('/login').send({ password: 'wrong' }).expect(401)
      const refused = await agent.post('/login').send({ password: 'wrong' }).expect(429)
      expect(refused.headers['retry-after']).toBeDefined()
    },
  )

  it.each(stores)('skipFailedRequests on %s: failed requests do not count', async (_n, makeStore) => {
    const agent = loginApp(makeStore(), { skipFailedRequests: true })
    for (let i = 0; i < 20; i++) await agent.post('/login').send({ password: 'wrong' }).expect(401)
    for (let i = 0; i < 5; i++) await agent.post('/login').send({ password: 'right' }).expect(200)
    await agent.post('/login').send({ password: 'right' }).expect(429)
  })

  it('never drives a count below zero or into a later window', async () => {
    let now = Math.floor(Date.now() / 1000) * 1000 + 5_000
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    const limiter = new Limiter({ max: 2, store, skipSuccessfulRequests: true, clock: () => now })
    const d = (await limiter.consume('c')) as Decision
    await limiter.refund(d)
    await limiter.refund(d) // twice: the second is ignored
    expect((await limiter.peek('c')).remaining).toBe(2)
    const old = (await limiter.consume('c')) as Decision
    now += 1000 // the next window
    await limiter.consume('c')
    await limiter.refund(old) // belongs to the previous window: leaves this one alone
    expect((await limiter.peek('c')).remaining).toBe(1)
  })
})

describe('shadow mode', () => {
  it('reports the limit in headers and events but never refuses', async () => {
    const app = express()
    const middleware = rateLimit({ max: 2, window: '1 minute', shadow: true })
    let limited = 0
    middleware.limiter.on('limited', () => limited++)
    app.use(middleware)
    app.get('/', (req, res) => {
      res.json({ shadowed: req.rateLimit?.shadowed === true })
    })
    const agent = request(createServer(app))
    for (let i = 0; i < 2; i++) await agent.get('/').expect(200, { shadowed: false })
    for (let i = 0; i < 3; i++) {
      const res = await agent.get('/').expect(200, { shadowed: true })
      const [, params] = parseList(res.headers.ratelimit as string)[0] as [unknown, Map<string, unknown>]
      expect(params.get('r')).toBe(0)
      expect(res.headers['retry-after']).toBeUndefined()
    }
    expect(limited).toBe(3)
  })
})
