import { type Decision, type Logger, MemoryStore, rateLimit, rateLimitOf, TollgateError, withRateLimit } from '@tollgate/web'
import { BURST, expressBurst, MAX, type Seen, seen, startOfSecond } from '../support/demo-burst'

// withRateLimit(handler, options) around a Fetch API handler, called as a runtime calls it. The client
// IP comes as Bun.serve gives it (the server, the handler's second argument); test/web/client-ip.test.ts
// covers the other runtimes' ways.

const quiet: Logger = { warn: () => {}, error: () => {} }
/** Bun.serve's server as the handler's second argument: the peer of every request is `address`. */
const bun = (address = '203.0.113.7') => ({ requestIP: () => ({ address, family: 'IPv4', port: 40000 }) })
const ok = () => new Response('ok', { headers: { 'content-type': 'text/plain' } })

async function seenOf(response: Response): Promise<Seen> {
  return seen(response.status, (name) => response.headers.get(name), await response.text())
}

describe('withRateLimit', () => {
  it('answers the demo burst with ten 200s and two 429s, field for field and byte for byte as Express', async () => {
    const clock = startOfSecond()
    const handler = withRateLimit(ok, { max: MAX, clock })
    const web: Seen[] = []
    for (let i = 0; i < BURST; i++) web.push(await seenOf(await handler(new Request('http://app.test/'), bun())))
    expect(web.map((s) => s.status)).toEqual([...Array(10).fill(200), 429, 429])
    expect(web[0]).toMatchObject({ ratelimit: '"10-per-1s";r=9;t=1', policy: '"10-per-1s";q=10;w=1' })
    expect(web[11]).toMatchObject({ retryAfter: '1', cacheControl: 'no-store', contentType: 'application/problem+json' })
    expect(JSON.parse(web[11]!.body!)).toEqual({
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
      detail: 'Too many requests: the limit is 10 per 1 second. Retry after the number of seconds in the Retry-After header.',
    })
    expect(web).toEqual(await expressBurst(clock))
  })

  it('does not call the handler for a refused request', async () => {
    const handler = jest.fn(ok)
    const limited = withRateLimit(handler, { max: 1, window: '1m' })
    await limited(new Request('http://app.test/'), bun())
    expect((await limited(new Request('http://app.test/'), bun())).status).toBe(429)
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it('passes the handler its arguments and `this`, as a Worker calls fetch(request, env, ctx)', async () => {
    const worker = {
      name: 'worker',
      fetch: withRateLimit(
        function (this: { name: string }, _request: Request, env: { greeting: string }, ctx: { id: number }) {
          return new Response(`${env.greeting} from ${this.name} ${ctx.id}`)
        },
        { max: 5, ip: () => '203.0.113.7' },
      ),
    }
    const response = await worker.fetch(new Request('http://app.test/'), { greeting: 'hello' }, { id: 7 })
    expect(await response.text()).toBe('hello from worker 7')
  })

  it('adds the fields to a response whose headers are immutable, by copying it', async () => {
    const limited = withRateLimit(() => Response.redirect('http://app.test/elsewhere', 302), { max: 5 })
    const response = await limited(new Request('http://app.test/'), bun())
    expect(response.status).toBe(302)
    expect(response.headers.get('location')).toBe('http://app.test/elsewhere')
    expect(response.headers.get('ratelimit')).toBe('"5-per-1s";r=4;t=1')
  })

  it('lists both policies when one limit wraps another, and the tighter one decides', async () => {
    const clock = startOfSecond(60_000)
    const login = withRateLimit(ok, { max: 2, window: '1m', clock, prefix: 'login:' })
    const app = withRateLimit(login, { max: 10, window: '1m', clock })
    const statuses: number[] = []
    let last: Response | undefined
    for (let i = 0; i < 3; i++) {
      last = await app(new Request('http://app.test/login'), bun())
      statuses.push(last.status)
    }
    expect(statuses).toEqual([200, 200, 429])
    expect(last!.headers.get('ratelimit-policy')).toBe('"10-per-1m";q=10;w=60, "2-per-1m";q=2;w=60')
    expect(last!.headers.get('ratelimit')).toBe('"10-per-1m";r=7;t=60, "2-per-1m";r=0;t=60')
  })

  it('gives the handler its decision through rateLimitOf(request)', async () => {
    let decision: Decision | undefined
    const limited = withRateLimit(
      (request: Request) => {
        decision = rateLimitOf(request)
        return ok()
      },
      { max: 3 },
    )
    await limited(new Request('http://app.test/'), bun())
    expect(decision).toMatchObject({ allowed: true, limit: 3, remaining: 2 })
  })

  it('passes through what the handler throws, and a bad key as a TollgateError', async () => {
    const failing = withRateLimit(
      () => {
        throw new Error('boom')
      },
      { max: 5 },
    )
    await expect(failing(new Request('http://app.test/'), bun())).rejects.toThrow('boom')
    const badKey = withRateLimit(ok, { key: () => '' as string, logger: quiet })
    await expect(badKey(new Request('http://app.test/'))).rejects.toThrow(TollgateError)
  })

  it('returns what a handler returns instead of a Response (Bun after a WebSocket upgrade) as it is', async () => {
    const upgraded = withRateLimit(() => undefined, { max: 5 })
    expect(await upgraded(new Request('http://app.test/'), bun())).toBeUndefined()
  })

  it('refunds a failed response with skipFailedRequests, and frees a concurrency slot when the handler ends', async () => {
    let status = 500
    const flaky = withRateLimit(() => new Response('', { status }), { max: 1, window: '1m', skipFailedRequests: true })
    expect((await flaky(new Request('http://app.test/'), bun())).status).toBe(500)
    status = 200
    expect((await flaky(new Request('http://app.test/'), bun())).status).toBe(200)
    expect((await flaky(new Request('http://app.test/'), bun())).status).toBe(429)

    const slots = withRateLimit(ok, { max: 1, algorithm: 'concurrency', window: '1m' })
    for (let i = 0; i < 3; i++) expect((await slots(new Request('http://app.test/'), bun())).status).toBe(200)
  })

  it('refuses a bad option at construction, naming it', () => {
    expect(() => withRateLimit(ok, { trustProxy: -1 })).toThrow(/Invalid option "trustProxy".*-1/)
    expect(() => withRateLimit(ok, { ip: 'x-real-ip' as never })).toThrow(/Invalid option "ip": expected a function/)
    expect(() => withRateLimit(ok, { trustproxy: 1 } as never)).toThrow(/Unknown option "trustproxy" \(did you mean "trustProxy"\?\)/)
    expect(() => withRateLimit('handler' as never)).toThrow(/Invalid option "handler"/)
  })
})

describe('rateLimit, the limit applied by hand', () => {
  it('resolves to the decision, the header fields and, over the limit, the refusal to send', async () => {
    const limit = rateLimit({ max: 1, window: '1m', store: new MemoryStore(), clock: startOfSecond(60_000) })
    const first = await limit(new Request('http://app.test/'), bun())
    expect(first.response).toBeUndefined()
    expect(first.decision).toMatchObject({ allowed: true, remaining: 0 })
    expect(first.headers.get('ratelimit')).toBe('"1-per-1m";r=0;t=60')
    const second = await limit(new Request('http://app.test/'), bun())
    expect(second.decision).toMatchObject({ allowed: false })
    expect(second.response?.status).toBe(429)
    expect(second.response?.headers.get('retry-after')).toBe('60')
    expect(second.headers.get('retry-after')).toBe('60')
  })

  it('resolves with no decision and no fields for a request that skip skips', async () => {
    const limit = rateLimit({ max: 1, skip: (request) => request.headers.has('x-internal') })
    const result = await limit(new Request('http://app.test/', { headers: { 'x-internal': '1' } }))
    expect(result).toMatchObject({ decision: undefined, response: undefined })
    expect([...result.headers]).toEqual([])
  })

  it('answers a client on the deny list with 403 and no quota fields', async () => {
    const limit = rateLimit({ denyList: ['203.0.113.0/24'] })
    const { response } = await limit(new Request('http://app.test/'), bun('203.0.113.9'))
    expect(response?.status).toBe(403)
    expect(response?.headers.get('ratelimit')).toBeNull()
    expect(JSON.parse(await response!.text())).toMatchObject({ title: 'Forbidden', status: 403 })
  })
})
