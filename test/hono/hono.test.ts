import { createAdaptorServer } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { type Decision, type Logger, rateLimit } from '@tollgate/hono'
import { Hono } from 'hono'
import { BURST, expressBurst, MAX, type Seen, seen, startOfSecond } from '../support/demo-burst'
import { close, get, listen } from '../support/http'

// The Hono middleware, through app.request() (Hono's own way to call an app, with the `env` a runtime
// would pass) and on Node through @hono/node-server.

const quiet: Logger = { warn: () => {}, error: () => {} }
/** Bun's server as Hono gets it on Bun (c.env): the peer of every request is `address`. */
const bun = (address = '203.0.113.7') => ({ requestIP: () => ({ address, family: 'IPv4', port: 40000 }) })

async function seenOf(response: Response): Promise<Seen> {
  return seen(response.status, (name) => response.headers.get(name), await response.text())
}

describe('rateLimit for Hono', () => {
  it('answers the demo burst with ten 200s and two 429s, field for field and byte for byte as Express', async () => {
    const clock = startOfSecond()
    const app = new Hono()
    app.use(rateLimit({ max: MAX, clock }))
    app.get('/', (c) => c.text('ok'))
    const hono: Seen[] = []
    for (let i = 0; i < BURST; i++) hono.push(await seenOf(await app.request('/', {}, bun())))
    expect(hono.map((s) => s.status)).toEqual([...Array(10).fill(200), 429, 429])
    expect(hono).toEqual(await expressBurst(clock))
  })

  it('answers the demo burst the same on Node, through @hono/node-server', async () => {
    const clock = startOfSecond()
    const app = new Hono()
    app.use(rateLimit({ max: MAX, clock }))
    app.get('/', (c) => c.text('ok'))
    const server = createAdaptorServer({ fetch: app.fetch })
    const url = await listen(server as Parameters<typeof listen>[0])
    try {
      const node: Seen[] = []
      for (let i = 0; i < BURST; i++) {
        const r = await get(url)
        node.push(seen(r.status, (name) => r.headers[name] as string | undefined, r.body))
      }
      expect(node).toEqual(await expressBurst(clock))
    } finally {
      await close(server as Parameters<typeof close>[0])
    }
  })

  it('puts the decision on the context, typed, for the handler', async () => {
    const app = new Hono()
    let decision: Decision | undefined
    app.use(rateLimit({ max: 3 }))
    app.get('/', (c) => {
      decision = c.get('rateLimit')
      return c.json({ left: c.get('rateLimit').remaining, limits: c.get('rateLimits').length })
    })
    const response = await app.request('/', {}, bun())
    expect(await response.json()).toEqual({ left: 2, limits: 1 })
    expect(decision).toMatchObject({ allowed: true, limit: 3 })
  })

  it('stacks a route limit on the global one: both count, both show, the tighter decides', async () => {
    const clock = startOfSecond(60_000)
    const app = new Hono()
    app.use(rateLimit({ max: 10, window: '1m', clock }))
    app.post('/login', rateLimit({ max: 2, window: '1m', clock, prefix: 'login:' }), (c) => c.text('in'))
    app.get('/', (c) => c.text('ok'))
    const statuses: number[] = []
    let last: Response | undefined
    for (let i = 0; i < 3; i++) {
      last = await app.request('/login', { method: 'POST' }, bun())
      statuses.push(last.status)
    }
    expect(statuses).toEqual([200, 200, 429])
    expect(last!.headers.get('ratelimit-policy')).toBe('"10-per-1m";q=10;w=60, "2-per-1m";q=2;w=60')
    expect(last!.headers.get('ratelimit')).toBe('"10-per-1m";r=7;t=60, "2-per-1m";r=0;t=60')
    expect((await app.request('/', {}, bun())).headers.get('ratelimit')).toBe('"10-per-1m";r=6;t=60')
  })

  it('counts a request once when one middleware is mounted on the app and on the route', async () => {
    const app = new Hono()
    const limit = rateLimit({ max: 3, window: '1m' })
    app.use(limit)
    app.get('/', limit, (c) => c.text('ok'))
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) statuses.push((await app.request('/', {}, bun())).status)
    expect(statuses).toEqual([200, 200, 200, 429])
  })

  it('adds the fields to the answer of app.onError, and refunds it with skipFailedRequests', async () => {
    const app = new Hono()
    let fail = true
    app.use(rateLimit({ max: 1, window: '1m', skipFailedRequests: true }))
    app.get('/', (c) => {
      if (fail) throw new Error('boom')
      return c.text('ok')
    })
    app.onError((_error, c) => c.text('failed', 500))
    const failed = await app.request('/', {}, bun())
    expect(failed.status).toBe(500)
    expect(failed.headers.get('ratelimit')).toMatch(/^"1-per-1m";r=0;t=\d+$/)
    fail = false
    expect((await app.request('/', {}, bun())).status).toBe(200)
    expect((await app.request('/', {}, bun())).status).toBe(429)
  })

  it("reads the client IP with the runtime's getConnInfo when given, and from X-Forwarded-For with trustProxy", async () => {
    const keys: string[] = []
    const app = new Hono()
    app.get('/conninfo', rateLimit({ getConnInfo: () => ({ remote: { address: '198.51.100.20' } }) }), (c) =>
      c.text(c.get('rateLimit').key),
    )
    app.get('/proxied', rateLimit({ trustProxy: 1 }), (c) => c.text(c.get('rateLimit').key))
    keys.push(await (await app.request('/conninfo')).text())
    keys.push(await (await app.request('/proxied', { headers: { 'x-forwarded-for': '10.0.0.1, 203.0.113.44' } }, bun())).text())
    expect(keys).toEqual(['198.51.100.20', '203.0.113.44'])
  })

  it("takes @hono/node-server's getConnInfo, or reads Node's socket without it", async () => {
    const app = new Hono()
    app.get('/given', rateLimit({ getConnInfo, logger: quiet }), (c) => c.text(c.get('rateLimit').key))
    app.get('/default', rateLimit({ logger: quiet }), (c) => c.text(c.get('rateLimit').key))
    const server = createAdaptorServer({ fetch: app.fetch })
    const url = await listen(server as Parameters<typeof listen>[0])
    try {
      expect((await get(`${url}/given`)).body).toBe('127.0.0.1')
      expect((await get(`${url}/default`)).body).toBe('127.0.0.1')
    } finally {
      await close(server as Parameters<typeof close>[0])
    }
  })

  it('refuses a bad option at construction, naming it', () => {
    expect(() => rateLimit({ getConnInfo: 'bun' as never })).toThrow(/Invalid option "getConnInfo": expected a function/)
    expect(() => rateLimit({ trustProxy: 1.5 })).toThrow(/Invalid option "trustProxy"/)
  })
})
