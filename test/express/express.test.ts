import { createServer } from 'node:http'
import { type Decision, MemoryStore, RateLimit, RedisStore, rateLimit } from '@tollgate/express'
import express from 'express'
import express4 from 'express4'
import { parseList } from 'structured-headers'
import request from 'supertest'

const quiet = { warn: () => {}, error: () => {} }

describe.each([
  ['Express 5', express],
  ['Express 4', express4 as unknown as typeof express],
])('rateLimit() on %s', (_name, makeApp) => {
  function app(options: Parameters<typeof rateLimit>[0], now = () => 1_763_729_100_250) {
    const a = makeApp()
    a.use(rateLimit({ clock: now, logger: quiet, ...options }))
    a.get('/', (req, res) => {
      res.json({ remaining: req.rateLimit?.remaining })
    })
    return a
  }

  it('allows max requests, then returns 429 with Retry-After, RateLimit and RateLimit-Policy', async () => {
    const server = createServer(app({ max: 3 }))
    const agent = request(server)
    for (let i = 0; i < 3; i++) {
      const res = await agent.get('/').expect(200)
      expect(res.headers.ratelimit).toBe(`"3-per-1s";r=${2 - i};t=1`)
      expect(res.body).toEqual({ remaining: 2 - i })
    }
    const refused = await agent.get('/').expect(429)
    expect(refused.headers['retry-after']).toBe('1')
    expect(refused.headers['cache-control']).toBe('no-store')
    expect(refused.headers['ratelimit-policy']).toBe('"3-per-1s";q=3;w=1')
    expect(parseList(refused.headers.ratelimit as string)).toHaveLength(1)
    expect(refused.headers['content-type']).toBe('application/problem+json')
    expect(JSON.parse(refused.text)).toMatchObject({ title: 'Too Many Requests', status: 429 })
    server.close()
  })

  it('limits one route on its own and stacks it on the global limit', async () => {
    const a = makeApp()
    const clock = () => 1_763_729_100_250
    a.use(rateLimit({ max: 100, logger: quiet, clock }))
    a.post('/login', rateLimit({ max: 2, window: '1 minute', prefix: 'tg:login:', logger: quiet, clock }), (_req, res) => {
      res.send('ok')
    })
    const agent = request(createServer(a))
    await agent.post('/login').expect(200)
    const second = await agent.post('/login').expect(200)
    expect(parseList(second.headers['ratelimit-policy'] as string).map(([name]) => String(name))).toEqual(['100-per-1s', '2-per-1m'])
    expect(second.headers.ratelimit).toBe('"100-per-1s";r=98;t=1, "2-per-1m";r=0;t=60')
    const refused = await agent.post('/login').expect(429)
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1)
  })

  it('shows every decision on req.rateLimit and req.rateLimits, in a mounted sub-app too, through its own app alone, and lets code assign them', async () => {
    const a = makeApp()
    a.use(rateLimit({ max: 5, clock: () => 1_763_729_100_250, logger: quiet }))
    const sub = makeApp()
    sub.get('/', rateLimit({ max: 2, prefix: 'tg:sub:', clock: () => 1_763_729_100_250, logger: quiet }), (req, res) => {
      res.json({ last: req.rateLimit?.limit, all: req.rateLimits?.map((d) => [d.limit, d.remaining]) })
    })
    a.use('/sub', sub)
    a.get('/assign', (req, res) => {
      req.rateLimit = undefined
      res.json({ assigned: req.rateLimit === undefined, own: Object.hasOwn(req, 'rateLimit'), all: req.rateLimits?.length })
    })
    // A limiter that runs in the sub-app alone still shows its decision to the parent's handlers.
    const b = makeApp()
    const bSub = makeApp()
    bSub.use(rateLimit({ max: 3, prefix: 'tg:bsub:', clock: () => 1_763_729_100_250, logger: quiet }))
    b.use('/sub', bSub)
    b.use((req, res) => {
      res.json({ last: req.rateLimit?.remaining })
    })
    // An app with no Tollgate limiter, in the same process.
    const plain = makeApp()
    plain.get('/', (req, res) => {
      res.json({ has: 'rateLimit' in req || 'rateLimits' in req })
    })
    const server = createServer(a)
    const agent = request(server)
    expect((await agent.get('/sub/').expect(200)).body).toEqual({
      last: 2,
      all: [
        [5, 4],
        [2, 1],
      ],
    })
    expect((await agent.get('/assign').expect(200)).body).toEqual({ assigned: true, own: true, all: 1 })
    // Each request sees only its own decisions.
    expect((await agent.get('/sub/').expect(200)).body).toEqual({
      last: 2,
      all: [
        [5, 2],
        [2, 0],
      ],
    })
    server.close()
    expect((await request(createServer(b)).get('/sub/x').expect(200)).body).toEqual({ last: 2 })
    // Nothing on the prototype every Express app in the process shares, and nothing in an app without a limiter.
    expect((await request(createServer(plain)).get('/').expect(200)).body).toEqual({ has: false })
    for (const shared of [express.request, express4.request]) expect('rateLimit' in shared || 'rateLimits' in shared).toBe(false)
  })

  it('adds nothing to res.locals, and counts a request once when mounted twice, whatever res.locals holds', async () => {
    const a = makeApp()
    const limit = rateLimit({ max: 5, clock: () => 1_763_729_100_250, logger: quiet })
    a.get('/locals', limit, limit, (req, res) => {
      // A template sees res.locals through its string keys: Tollgate adds none. The mark that counts the
      // request once is in res.locals too, not on the request (visits.ts says why).
      const marks = Object.getOwnPropertySymbols(req).filter((s) => s.description?.startsWith('tollgate'))
      res.json({
        keys: Object.keys(res.locals),
        json: JSON.stringify(res.locals),
        marks: marks.length,
        all: req.rateLimits?.map((d) => d.remaining),
      })
    })
    a.get(
      '/replaced',
      (_req, res, next) => {
        res.locals = null as unknown as typeof res.locals
        next()
      },
      limit,
      limit,
      (req, res) => {
        res.json({ last: req.rateLimit?.remaining, all: req.rateLimits?.map((d) => d.remaining) })
      },
    )
    const agent = request(createServer(a))
    // Mounted twice, counted once, on either kind of request.
    expect((await agent.get('/locals').expect(200)).body).toEqual({ keys: [], json: '{}', marks: 0, all: [4] })
    expect((await agent.get('/replaced').expect(200)).body).toEqual({ last: 3, all: [3] })
    expect((await agent.get('/locals').expect(200)).body).toEqual({ keys: [], json: '{}', marks: 0, all: [2] })
  })

  it('sends a custom message, status code, or handler', async () => {
    await request(createServer(app({ max: 0, message: 'slow down' })))
      .get('/')
      .expect(429, 'slow down')
    await request(createServer(app({ max: 0, message: { error: 'too many' } })))
      .get('/')
      .expect('content-type', /application\/json/)
      .expect(429, { error: 'too many' })
    await request(createServer(app({ max: 0, statusCode: 503 })))
      .get('/')
      .expect(503)
    const handled = makeApp()
    handled.use(
      rateLimit({
        max: 0,
        logger: quiet,
        handler: (_req, res, _next, decision: Decision) => {
          res.status(418).json({ retryIn: decision.retryAfterMs > 0 })
        },
      }),
    )
    const res = await request(createServer(handled)).get('/').expect(418, { retryIn: true })
    expect(res.headers['retry-after']).toBeDefined()
  })

  it('hands a throwing key function to the error handler: a 500, not a crash or a hang', async () => {
    const a = makeApp()
    a.use(
      rateLimit({
        logger: quiet,
        key: () => {
          throw new Error('no user')
        },
      }),
    )
    a.get('/', (_req, res) => {
      res.send('unreachable')
    })
    a.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).send(error.message)
    })
    const res = await request(createServer(a)).get('/').expect(500)
    expect(res.text).toMatch(/Option "key" threw no user/)
  })

  it('keys on req.ip, so X-Forwarded-For counts only when Express trusts the proxy', async () => {
    const untrusted = app({ max: 1 })
    const agent = request(createServer(untrusted))
    await agent.get('/').set('X-Forwarded-For', '203.0.113.1').expect(200)
    await agent.get('/').set('X-Forwarded-For', '203.0.113.2').expect(429)
    const trusted = app({ max: 1 })
    trusted.set('trust proxy', 'loopback')
    const agent2 = request(createServer(trusted))
    await agent2.get('/').set('X-Forwarded-For', '203.0.113.1').expect(200)
    await agent2.get('/').set('X-Forwarded-For', '203.0.113.2').expect(200)
    await agent2.get('/').set('X-Forwarded-For', '203.0.113.1').expect(429)
  })
})

describe('@RateLimit decorator on an Express controller', () => {
  class AccountController {
    calls = 0
    @RateLimit({ max: 2, window: '1 minute', logger: quiet })
    async login(_req: express.Request, res: express.Response) {
      this.calls++
      res.json({ calls: this.calls })
    }
  }

  it('runs the method until the limit, then answers 429 without running it', async () => {
    const controller = new AccountController()
    const a = express()
    a.post('/login', (req, res, next) => controller.login(req, res).catch(next))
    const agent = request(createServer(a))
    await agent.post('/login').expect(200, { calls: 1 })
    const second = await agent.post('/login').expect(200, { calls: 2 })
    expect(second.headers.ratelimit).toMatch(/^"2-per-1m";r=0;t=\d+$/)
    const refused = await agent.post('/login').expect(429)
    expect(refused.headers['retry-after']).toBeDefined()
    expect(controller.calls).toBe(2)
  })
})

it('re-exports the stores so an app imports from one package', () => {
  expect(typeof MemoryStore).toBe('function')
  expect(typeof RedisStore).toBe('function')
})
