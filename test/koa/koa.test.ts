import { createServer } from 'node:http'
import Router from '@koa/router'
import { type Decision, Limiter, MemoryStore, type RateLimitOptions, RedisStore, rateLimit, TollgateError } from '@tollgate/koa'
import Koa from 'koa'
import Koa2 from 'koa2'
import { parseList } from 'structured-headers'
import request from 'supertest'

const quiet = { warn: () => {}, error: () => {} }
const clock = () => 1_763_729_100_250 // 250 ms into a second: every 1 s window below has t=1

describe.each([
  ['Koa 3', Koa],
  ['Koa 2', Koa2],
])('rateLimit() on %s', (_name, KoaApp) => {
  function app(options: RateLimitOptions, setup?: (a: Koa) => void) {
    const a = new KoaApp()
    setup?.(a)
    a.use(rateLimit({ clock, logger: quiet, ...options }))
    a.use((ctx) => {
      ctx.body = { remaining: ctx.state.rateLimit?.remaining }
    })
    return request(createServer(a.callback()))
  }

  it('allows max requests, then returns 429 with Retry-After, RateLimit and RateLimit-Policy', async () => {
    const agent = app({ max: 3 })
    for (let i = 0; i < 3; i++) {
      const res = await agent.get('/').expect(200, { remaining: 2 - i })
      expect(res.headers.ratelimit).toBe(`"3-per-1s";r=${2 - i};t=1`)
    }
    const refused = await agent.get('/').expect(429)
    expect(refused.headers['retry-after']).toBe('1')
    expect(refused.headers['cache-control']).toBe('no-store')
    expect(refused.headers['ratelimit-policy']).toBe('"3-per-1s";q=3;w=1')
    expect(parseList(refused.headers.ratelimit as string)).toHaveLength(1)
    // The same content type as the other adapters send, not one Koa rewrote.
    expect(refused.headers['content-type']).toBe('application/problem+json')
    expect(JSON.parse(refused.text)).toMatchObject({ title: 'Too Many Requests', status: 429 })
  })

  it('sends a custom message, status code, or handler reply', async () => {
    await app({ max: 0, message: 'slow down' }).get('/').expect('content-type', 'text/plain; charset=utf-8').expect(429, 'slow down')
    await app({ max: 0, message: { error: 'too many' } })
      .get('/')
      .expect('content-type', /application\/json/)
      .expect(429, { error: 'too many' })
    await app({ max: 0, statusCode: 503 }).get('/').expect(503)
    const handled = await app({
      max: 0,
      handler: (ctx, decision: Decision) => {
        ctx.status = 418
        ctx.body = { wait: decision.retryAfterMs > 0 }
      },
    })
      .get('/')
      .expect(418, { wait: true })
    expect(handled.headers['retry-after']).toBe('1')
    // A handler that only sets a body keeps the limiter's status.
    const later = (ctx: Koa.Context) => {
      ctx.body = 'later'
    }
    await app({ max: 0, handler: later }).get('/').expect(429, 'later')
  })

  it('hands a throwing key function to Koa error handling: a 500, not a crash or a hang', async () => {
    const errors: Error[] = []
    const agent = app(
      {
        key: () => {
          throw new Error('no user')
        },
      },
      (a) => {
        a.silent = true
        a.on('error', (e: Error) => errors.push(e))
      },
    )
    await agent.get('/').expect(500)
    expect(errors[0]).toBeInstanceOf(TollgateError)
    expect(errors[0]?.message).toMatch(/Option "key" threw no user/)
  })

  it('keys on ctx.ip, so X-Forwarded-For counts only when app.proxy is on', async () => {
    const untrusted = app({ max: 1 })
    await untrusted.get('/').set('X-Forwarded-For', '203.0.113.1').expect(200)
    await untrusted.get('/').set('X-Forwarded-For', '203.0.113.2').expect(429)
    const trusted = app({ max: 1 }, (a) => {
      a.proxy = true
    })
    await trusted.get('/').set('X-Forwarded-For', '203.0.113.1').expect(200)
    await trusted.get('/').set('X-Forwarded-For', '203.0.113.2').expect(200)
    await trusted.get('/').set('X-Forwarded-For', '203.0.113.1').expect(429)
  })

  it('warns once when X-Forwarded-For arrives while app.proxy is off, and never when it is on', async () => {
    const lines: string[] = []
    const logger = { warn: (m: string) => void lines.push(m), error: (m: string) => void lines.push(m) }
    const untrusted = app({ logger })
    await untrusted.get('/').expect(200)
    expect(lines).toEqual([])
    for (let i = 0; i < 3; i++) await untrusted.get('/').set('X-Forwarded-For', '203.0.113.1')
    expect(lines).toEqual([expect.stringMatching(/X-Forwarded-For but Koa does not trust proxies.*app\.proxy = true/)])
    const trusted = app({ logger }, (a) => {
      a.proxy = true
    })
    await trusted.get('/').set('X-Forwarded-For', '203.0.113.1')
    expect(lines).toHaveLength(1)
  })

  it('stacks a @koa/router route limit on the app limit: both count and both appear in the headers', async () => {
    const a = new KoaApp()
    const router = new Router()
    a.use(rateLimit({ max: 100, clock, logger: quiet }))
    router.post('/login', rateLimit({ max: 2, window: '1 minute', clock, logger: quiet }), (ctx) => {
      ctx.body = { limits: ctx.state.rateLimits?.map((d) => d.limit) }
    })
    router.get('/health', (ctx) => {
      ctx.body = 'ok'
    })
    a.use(router.routes())
    const agent = request(createServer(a.callback()))
    await agent.post('/login').expect(200, { limits: [100, 2] })
    const second = await agent.post('/login').expect(200)
    expect(parseList(second.headers['ratelimit-policy'] as string).map(([name]) => String(name))).toEqual(['100-per-1s', '2-per-1m'])
    expect(second.headers.ratelimit).toBe('"100-per-1s";r=98;t=1, "2-per-1m";r=0;t=60')
    const refused = await agent.post('/login').expect(429)
    expect(refused.headers['retry-after']).toBe('60')
    const health = await agent.get('/health').expect(200)
    expect(health.headers.ratelimit).toBe('"100-per-1s";r=96;t=1')
  })

  it('counts a request once when the same middleware is mounted on the app and on a route', async () => {
    const a = new KoaApp()
    const router = new Router()
    const limit = rateLimit({ max: 5, clock, logger: quiet })
    a.use(limit)
    router.get('/', limit, (ctx) => {
      ctx.body = { limits: ctx.state.rateLimits?.length }
    })
    a.use(router.routes())
    const res = await request(createServer(a.callback())).get('/').expect(200, { limits: 1 })
    expect(res.headers.ratelimit).toBe('"5-per-1s";r=4;t=1')
  })

  it('refunds failed requests with skipFailedRequests, once the response is over', async () => {
    const a = new KoaApp()
    a.silent = true
    const router = new Router()
    router.post('/login', rateLimit({ max: 2, window: '1 minute', skipFailedRequests: true, clock, logger: quiet }), (ctx) => {
      if (ctx.get('x-password') !== 'right') ctx.throw(401)
      ctx.body = { ok: true }
    })
    a.use(router.routes())
    const agent = request(createServer(a.callback()))
    for (let i = 0; i < 5; i++) await agent.post('/login').expect(401)
    await agent.post('/login').set('X-Password', 'right').expect(200)
    await agent.post('/login').set('X-Password', 'right').expect(200)
    await agent.post('/login').set('X-Password', 'right').expect(429)
  })

  it('rejects bad options at construction, naming the option', () => {
    expect(() => rateLimit({ max: -1 })).toThrow(/Invalid option "max"/)
    expect(() => rateLimit({ windowMs: 5 } as RateLimitOptions)).toThrow(/Unknown option "windowMs"/)
    expect(() => rateLimit({ handler: 'no' } as unknown as RateLimitOptions)).toThrow(/Invalid option "handler"/)
  })
})

it('re-exports what an app needs from core, so it imports from one package', () => {
  expect([typeof MemoryStore, typeof RedisStore, typeof Limiter, typeof TollgateError]).toEqual([
    'function',
    'function',
    'function',
    'function',
  ])
  expect(rateLimit().limiter).toBeInstanceOf(Limiter)
})
