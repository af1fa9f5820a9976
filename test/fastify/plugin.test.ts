import { type Decision, Limiter, MemoryStore, type RateLimitOptions, RedisStore, rateLimit, TollgateError } from '@tollgate/fastify'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { parseList } from 'structured-headers'
import { get, type Reply } from '../support/http'

// Real HTTP rather than app.inject(): light-my-request loads an ESM-only dependency jest cannot require.
const listening = new Map<FastifyInstance, Promise<string>>()
afterEach(async () => {
  await Promise.all([...listening.keys()].map((app) => app.close()))
  listening.clear()
})

async function inject(app: FastifyInstance, target: string | { method?: string; url: string; headers?: Record<string, string> }) {
  const { method, url, headers } = typeof target === 'string' ? { url: target } : target
  let base = listening.get(app)
  if (base === undefined) {
    base = app.listen({ port: 0, host: '127.0.0.1' })
    listening.set(app, base)
  }
  const reply: Reply = await get(`${await base}${url}`, { method, headers })
  return { statusCode: reply.status, headers: reply.headers, body: reply.body, json: () => JSON.parse(reply.body) }
}

const quiet = { warn: () => {}, error: () => {} }
const clock = () => 1_763_729_100_250 // 250 ms into a second: every 1 s window below has t=1

async function server(options: RateLimitOptions, serverOptions: FastifyServerOptions = {}): Promise<FastifyInstance> {
  const app = Fastify(serverOptions)
  await app.register(rateLimit, { clock, logger: quiet, ...options })
  app.get('/', async (request) => ({ remaining: request.rateLimit?.remaining }))
  return app
}

function policyNames(header: string | string[] | number | undefined): string[] {
  return parseList(String(header)).map(([name]) => String(name))
}

describe('the rateLimit plugin', () => {
  it('exposes its limiter as app.rateLimiter, whose events report each refusal', async () => {
    const app = await server({ max: 1 })
    expect(app.rateLimiter).toBeInstanceOf(Limiter)
    const limited: Decision[] = []
    app.rateLimiter.on('limited', (decision: Decision) => limited.push(decision))
    expect((await inject(app, '/')).statusCode).toBe(200)
    expect((await inject(app, '/')).statusCode).toBe(429)
    expect(limited.map((d) => [d.allowed, d.limit])).toEqual([[false, 1]])
    // The same limiter counts outside HTTP: the client has used its one request.
    expect((await app.rateLimiter.peek('127.0.0.1')).remaining).toBe(0)
  })

  it('allows max requests, then returns 429 with Retry-After, RateLimit and RateLimit-Policy', async () => {
    const app = await server({ max: 3 })
    for (let i = 0; i < 3; i++) {
      const res = await inject(app, '/')
      expect(res.statusCode).toBe(200)
      expect(res.headers.ratelimit).toBe(`"3-per-1s";r=${2 - i};t=1`)
      expect(res.json()).toEqual({ remaining: 2 - i })
    }
    const refused = await inject(app, '/')
    expect(refused.statusCode).toBe(429)
    expect(refused.headers['retry-after']).toBe('1')
    expect(refused.headers['cache-control']).toBe('no-store')
    expect(refused.headers['ratelimit-policy']).toBe('"3-per-1s";q=3;w=1')
    expect(refused.headers['content-type']).toBe('application/problem+json')
    expect(refused.json()).toMatchObject({ title: 'Too Many Requests', status: 429 })
  })

  it('sends a custom message, status code, or handler reply', async () => {
    expect((await inject(await server({ max: 0, message: 'slow down' }), '/')).body).toBe('slow down')
    const json = await inject(await server({ max: 0, message: { error: 'too many' } }), '/')
    expect(json.headers['content-type']).toMatch(/^application\/json/)
    expect(json.json()).toEqual({ error: 'too many' })
    expect((await inject(await server({ max: 0, statusCode: 503 }), '/')).statusCode).toBe(503)

    const sending = await server({ max: 0, handler: (_req, reply, d: Decision) => reply.code(418).send({ wait: d.retryAfterMs > 0 }) })
    const sent = await inject(sending, '/')
    expect([sent.statusCode, sent.json(), sent.headers['retry-after']]).toEqual([418, { wait: true }, '1'])
    // Returning a payload sends it, with the limiter's status already set.
    const returned = await inject(await server({ max: 0, handler: async () => ({ later: true }) }), '/')
    expect([returned.statusCode, returned.json()]).toEqual([429, { later: true }])
  })

  it('answers a throwing key function through the error handler: a 500, not a crash or a hang', async () => {
    const app = await server({
      key: () => {
        throw new Error('no user')
      },
    })
    const res = await inject(app, '/')
    expect(res.statusCode).toBe(500)
    expect(res.json().message).toMatch(/Option "key" threw no user/)
  })

  it('rejects bad options when registered, naming the option', async () => {
    await expect(Fastify().register(rateLimit, { max: -1 })).rejects.toThrow(/Invalid option "max"/)
    await expect(Fastify().register(rateLimit, { windowMs: 5 } as RateLimitOptions)).rejects.toThrow(/Unknown option "windowMs"/)
    await expect(Fastify().register(rateLimit, { hook: 'onSend' } as unknown as RateLimitOptions)).rejects.toThrow(
      'Invalid option "hook": expected "onRequest" or "preHandler", got "onSend" (string) [TG_INVALID_OPTION]',
    )
    await expect(Fastify().register(rateLimit, { handler: 'no' } as unknown as RateLimitOptions)).rejects.toThrow(TollgateError)
  })

  it('limits URLs no route matches, so probing for paths is counted too', async () => {
    const app = await server({ max: 1 })
    expect((await inject(app, '/nope')).statusCode).toBe(404)
    expect((await inject(app, '/nope')).statusCode).toBe(429)
  })

  it('counts a HEAD request once, on the limits of the GET route it stands for', async () => {
    const app = await server({ max: 10 })
    app.get('/page', { config: { rateLimit: { max: 2, window: '1 minute' } } }, async () => 'page')
    const head = await inject(app, { method: 'HEAD', url: '/page' })
    expect(head.statusCode).toBe(200)
    expect(head.headers.ratelimit).toBe('"10-per-1s";r=9;t=1, "2-per-1m";r=1;t=60')
    expect((await inject(app, '/page')).headers.ratelimit).toBe('"10-per-1s";r=8;t=1, "2-per-1m";r=0;t=60')
    expect((await inject(app, { method: 'HEAD', url: '/page' })).statusCode).toBe(429)
  })

  it('counts a HEAD request once on a prefixed index route with hooks of its own, whatever copies its hook list', async () => {
    const app = Fastify()
    await app.register(
      async (scope) => {
        await scope.register(rateLimit, { max: 10, clock, logger: quiet })
        // Another plugin that duplicates hook lists must not make a request count twice.
        scope.addHook('onRoute', (route) => {
          if (Array.isArray(route.onRequest)) route.onRequest = [...route.onRequest, ...route.onRequest]
        })
        scope.get('/', { onRequest: [async () => {}], config: { rateLimit: { max: 3, window: '1 minute' } } }, async () => 'index')
      },
      { prefix: '/api' },
    )
    const remaining = []
    for (const [method, url] of [
      ['HEAD', '/api'],
      ['HEAD', '/api/'],
      ['GET', '/api/'],
    ] as const) {
      const res = await inject(app, { method, url })
      remaining.push(res.headers.ratelimit)
    }
    expect(remaining).toEqual([
      '"10-per-1s";r=9;t=1, "3-per-1m";r=2;t=60',
      '"10-per-1s";r=8;t=1, "3-per-1m";r=1;t=60',
      '"10-per-1s";r=7;t=1, "3-per-1m";r=0;t=60',
    ])
  })
})

describe('route config', () => {
  it('stacks a route limit on the plugin limit: both count and both appear in the headers', async () => {
    const app = await server({ max: 100 })
    app.post('/login', { config: { rateLimit: { max: 2, window: '1 minute' } } }, async (request) => ({ n: request.rateLimits?.length }))
    expect((await inject(app, { method: 'POST', url: '/login' })).json()).toEqual({ n: 2 })
    const second = await inject(app, { method: 'POST', url: '/login' })
    expect(policyNames(second.headers['ratelimit-policy'])).toEqual(['100-per-1s', '2-per-1m'])
    expect(second.headers.ratelimit).toBe('"100-per-1s";r=98;t=1, "2-per-1m";r=0;t=60')
    const refused = await inject(app, { method: 'POST', url: '/login' })
    expect(refused.statusCode).toBe(429)
    expect(refused.json().detail).toMatch(/limit is 2 per 1 minute/)
    // The refused request still counted on the plugin limit; other routes only see that one.
    expect((await inject(app, '/')).json()).toEqual({ remaining: 96 })
  })

  it("takes how to limit from the plugin (message, status...) but not the plugin's limit, and overrides what it sets", async () => {
    const app = await server({ max: 5, message: 'plugin says no', statusCode: 503 })
    app.get('/slow', { config: { rateLimit: { window: '1 minute' } } }, async () => 'ok')
    app.get('/own', { config: { rateLimit: { max: 0, message: 'route says no' } } }, async () => 'ok')
    // max 10 is the default, not the plugin's 5.
    expect((await inject(app, '/slow')).headers['ratelimit-policy']).toBe('"5-per-1s";q=5;w=1, "10-per-1m";q=10;w=60')
    const own = await inject(app, '/own')
    expect([own.statusCode, own.body]).toEqual([503, 'route says no'])
  })

  it('keeps route counts apart from the plugin counts when they share one store', async () => {
    const app = await server({ max: 3, store: new MemoryStore() })
    app.get('/a', { config: { rateLimit: { max: 3 } } }, async () => 'a')
    app.get('/b', { config: { rateLimit: { max: 3 } } }, async () => 'b')
    expect((await inject(app, '/a')).headers.ratelimit).toBe('"3-per-1s";r=2;t=1, "3-per-1s-2";r=2;t=1')
    expect((await inject(app, '/b')).headers.ratelimit).toBe('"3-per-1s";r=1;t=1, "3-per-1s-2";r=2;t=1')
  })

  it('turns every limit off for a route with rateLimit: false', async () => {
    const app = await server({ max: 1 })
    app.get('/health', { config: { rateLimit: false } }, async (request) => ({ limited: request.rateLimits !== undefined }))
    for (let i = 0; i < 3; i++) {
      const res = await inject(app, '/health')
      expect([res.statusCode, res.json(), res.headers.ratelimit]).toEqual([200, { limited: false }, undefined])
    }
    expect((await inject(app, '/')).statusCode).toBe(200)
  })

  it('rejects a bad route config when the route is declared, naming the route and the option', async () => {
    const app = await server({})
    expect(() => app.get('/x', { config: { rateLimit: { max: 'ten' as unknown as number } } }, async () => 'x')).toThrow(
      /^Route GET \/x, config\.rateLimit: Invalid option "max": .*"ten" \(string\) \[TG_INVALID_OPTION\]$/,
    )
    expect(() => app.get('/y', { config: { rateLimit: true as unknown as false } }, async () => 'y')).toThrow(
      /"config\.rateLimit" of route "GET \/y": expected an object of options or false, got true \(boolean\)/,
    )
  })
})

describe('refunds after the response', () => {
  it('skipSuccessfulRequests on a route: successful logins do not count, the 4th failed one gets 429', async () => {
    const app = await server({ max: 1000 })
    app.post('/login', { config: { rateLimit: { max: 3, window: '1 minute', skipSuccessfulRequests: true } } }, async (request, reply) =>
      request.headers['x-password'] === 'right' ? { ok: true } : reply.code(401).send({ ok: false }),
    )
    const login = (password: string) => inject(app, { method: 'POST', url: '/login', headers: { 'x-password': password } })
    for (let i = 0; i < 10; i++) expect((await login('right')).statusCode).toBe(200)
    for (let i = 0; i < 3; i++) expect((await login('wrong')).statusCode).toBe(401)
    expect((await login('wrong')).statusCode).toBe(429)
  })

  it('skipFailedRequests on the plugin: errors do not count', async () => {
    const app = await server({ max: 2, window: '1 minute', skipFailedRequests: true })
    app.get('/boom', async () => {
      throw new Error('boom')
    })
    for (let i = 0; i < 5; i++) expect((await inject(app, '/boom')).statusCode).toBe(500)
    expect((await inject(app, '/')).statusCode).toBe(200)
    expect((await inject(app, '/')).statusCode).toBe(200)
    expect((await inject(app, '/')).statusCode).toBe(429)
  })
})

describe('encapsulation', () => {
  it('limits only the scope the plugin is registered in, and its children', async () => {
    const app = Fastify()
    await app.register(
      async (scope) => {
        await scope.register(rateLimit, { max: 1, clock, logger: quiet })
        scope.get('/x', async () => 'x')
        await scope.register(async (child) => {
          child.get('/y', async () => 'y')
        })
      },
      { prefix: '/api' },
    )
    await app.register(async (sibling) => {
      sibling.get('/other', async () => 'other')
    })
    app.get('/open', async () => 'open')

    expect((await inject(app, '/api/x')).statusCode).toBe(200)
    expect((await inject(app, '/api/x')).statusCode).toBe(429)
    expect((await inject(app, '/api/y')).statusCode).toBe(429)
    for (const url of ['/open', '/other', '/open']) {
      const res = await inject(app, url)
      expect([res.statusCode, res.headers.ratelimit]).toEqual([200, undefined])
    }
  })

  it('applies nested plugins each once, and a route limit once, built by the nearest plugin', async () => {
    const app = await server({ max: 100 })
    await app.register(async (scope) => {
      await scope.register(rateLimit, { max: 50, window: '1 minute', message: 'the scope says no', clock, logger: quiet })
      scope.get('/deep', { config: { rateLimit: { max: 2 } } }, async (request) => request.rateLimits?.map((d) => d.limit))
    })
    expect((await inject(app, '/deep')).json()).toEqual([100, 50, 2])
    expect((await inject(app, '/deep')).headers.ratelimit).toBe('"100-per-1s";r=98;t=1, "50-per-1m";r=48;t=60, "2-per-1s";r=0;t=1')
    // The route limit took its message from the scope's plugin, the nearest one.
    expect((await inject(app, '/deep')).body).toBe('the scope says no')
  })
})

describe('registration order', () => {
  it('limits routes declared before the plugin, and warns once that their route limit was missed', async () => {
    const lines: string[] = []
    const app = Fastify()
    app.get('/early', { config: { rateLimit: { max: 1 } } }, async () => 'early')
    app.get('/early-off', { config: { rateLimit: false } }, async () => 'off')
    // Not awaited, as fastify code often registers plugins: the routes below are declared first.
    app.register(rateLimit, { max: 2, clock, logger: { warn: (m) => void lines.push(m), error: () => {} } })
    app.get('/late', async () => 'late')
    for (let i = 0; i < 2; i++) expect((await inject(app, '/early')).headers.ratelimit).toBe(`"2-per-1s";r=${1 - i};t=1`)
    expect((await inject(app, '/late')).statusCode).toBe(429)
    expect((await inject(app, '/early-off')).statusCode).toBe(200)
    expect(lines).toEqual([expect.stringMatching(/route GET \/early has config\.rateLimit, but it was declared before the plugin/)])
  })
})

describe('hook: "preHandler"', () => {
  async function withAuth(hook: 'onRequest' | 'preHandler') {
    const app = Fastify()
    app.decorateRequest('user', undefined)
    // Auth registered first, as an app would: requests it rejects must not use up the quota.
    app.addHook('onRequest', async (request, reply) => {
      const user = request.headers['x-user']
      if (user === undefined) return reply.code(401).send({ error: 'who are you?' })
      ;(request as typeof request & { user: string }).user = String(user)
    })
    await app.register(rateLimit, { max: 1, hook, clock, logger: quiet, key: (r) => (r as typeof r & { user: string }).user })
    app.get('/', async () => 'ok')
    return app
  }

  it('runs after authentication, so rejected requests are not counted and the key can use the user', async () => {
    const app = await withAuth('preHandler')
    for (let i = 0; i < 3; i++) expect((await inject(app, '/')).statusCode).toBe(401)
    expect((await inject(app, { url: '/', headers: { 'x-user': 'ada' } })).statusCode).toBe(200)
    expect((await inject(app, { url: '/', headers: { 'x-user': 'bob' } })).statusCode).toBe(200)
    expect((await inject(app, { url: '/', headers: { 'x-user': 'ada' } })).statusCode).toBe(429)
  })

  it('also suits a route limit that needs the user while the plugin limit runs on onRequest', async () => {
    const app = await server({ max: 10 })
    app.get('/me', { config: { rateLimit: { max: 1, hook: 'preHandler', key: (r) => String(r.headers['x-user']) } } }, async () => 'me')
    expect((await inject(app, { url: '/me', headers: { 'x-user': 'ada' } })).statusCode).toBe(200)
    expect((await inject(app, { url: '/me', headers: { 'x-user': 'ada' } })).statusCode).toBe(429)
    expect((await inject(app, { url: '/me', headers: { 'x-user': 'bob' } })).statusCode).toBe(200)
  })
})

describe('client IP', () => {
  it('keys on request.ip, so X-Forwarded-For counts only when trustProxy trusts the proxy', async () => {
    const untrusted = await server({ max: 1 })
    expect((await inject(untrusted, { url: '/', headers: { 'x-forwarded-for': '203.0.113.1' } })).statusCode).toBe(200)
    expect((await inject(untrusted, { url: '/', headers: { 'x-forwarded-for': '203.0.113.2' } })).statusCode).toBe(429)

    const trusted = await server({ max: 1 }, { trustProxy: '127.0.0.1' })
    expect((await inject(trusted, { url: '/', headers: { 'x-forwarded-for': '203.0.113.1' } })).statusCode).toBe(200)
    expect((await inject(trusted, { url: '/', headers: { 'x-forwarded-for': '203.0.113.2' } })).statusCode).toBe(200)
    expect((await inject(trusted, { url: '/', headers: { 'x-forwarded-for': '203.0.113.1' } })).statusCode).toBe(429)
  })

  function recorder() {
    const lines: string[] = []
    return { lines, logger: { warn: (m: string) => void lines.push(m), error: (m: string) => void lines.push(m) } }
  }

  it('warns once, for all its limits, when X-Forwarded-For arrives but fastify trusts no proxy', async () => {
    const { lines, logger } = recorder()
    const app = await server({ logger })
    app.get('/r', { config: { rateLimit: { max: 5 } } }, async () => 'r')
    await inject(app, '/')
    expect(lines).toEqual([])
    for (let i = 0; i < 3; i++) await inject(app, { url: '/r', headers: { 'x-forwarded-for': '203.0.113.1' } })
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/X-Forwarded-For but fastify does not trust proxies.*trustProxy/)
  })

  it('warns once when trustProxy is true, which lets any client pick its IP', async () => {
    const { lines, logger } = recorder()
    const app = await server({ logger }, { trustProxy: true })
    for (let i = 0; i < 3; i++) await inject(app, '/')
    expect(lines).toEqual([expect.stringMatching(/trustProxy option is true/)])
    const scoped = await server({ logger: recorder().logger }, { trustProxy: 'loopback' })
    await inject(scoped, { url: '/', headers: { 'x-forwarded-for': '203.0.113.1' } })
    expect(lines).toHaveLength(1)
  })
})

it('re-exports what an app needs from core, so it imports from one package', () => {
  expect([typeof MemoryStore, typeof RedisStore, typeof Limiter, typeof TollgateError]).toEqual([
    'function',
    'function',
    'function',
    'function',
  ])
})
