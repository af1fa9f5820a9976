import { type Logger, rateLimit } from '@tollgate/web'

// The key defaults to the client IP where the runtime gives one, next to the request: Bun.serve's
// server, Deno.serve's info, Node's request under @hono/node-server, CF-Connecting-IP on workerd.

function recorder(): { logger: Logger; lines: string[] } {
  const lines: string[] = []
  return { lines, logger: { warn: (m) => void lines.push(m), error: (m) => void lines.push(m) } }
}

const request = (headers: Record<string, string> = {}) => new Request('http://app.test/', { headers })

/** The client key the limit counted `request` under, called with `rest` as the runtime calls the handler. */
async function keyOf(options: Parameters<typeof rateLimit>[0], req: Request, ...rest: unknown[]): Promise<string | undefined> {
  const limit = rateLimit({ max: 100, ...options })
  return (await limit(req, ...rest)).decision?.key
}

describe('the client IP, from the runtime', () => {
  it("reads Bun.serve's server.requestIP(request)", async () => {
    const server = { requestIP: (r: Request) => (r.url === 'http://app.test/' ? { address: '::ffff:203.0.113.7', port: 1 } : null) }
    expect(await keyOf({}, request(), server)).toBe('203.0.113.7')
  })

  it("reads Deno.serve's info.remoteAddr", async () => {
    const info = { remoteAddr: { transport: 'tcp', hostname: '2001:db8:abcd:12ff::1', port: 4000 }, completed: Promise.resolve() }
    expect(await keyOf({}, request(), info)).toBe('2001:db8:abcd:1200::/56')
  })

  it("reads the socket of Node's request under @hono/node-server", async () => {
    const env = { incoming: { socket: { remoteAddress: '198.51.100.4' } }, outgoing: {} }
    expect(await keyOf({}, request(), env)).toBe('198.51.100.4')
  })

  describe('on Cloudflare Workers', () => {
    const navigator = Object.getOwnPropertyDescriptor(globalThis, 'navigator')
    afterEach(() => {
      if (navigator === undefined) delete (globalThis as { navigator?: unknown }).navigator
      else Object.defineProperty(globalThis, 'navigator', navigator)
    })

    it('reads CF-Connecting-IP, which Cloudflare sets, and never an env binding', async () => {
      Object.defineProperty(globalThis, 'navigator', { value: { userAgent: 'Cloudflare-Workers' }, configurable: true })
      const env = { incoming: { socket: { remoteAddress: '10.0.0.1' } } }
      expect(await keyOf({}, request({ 'cf-connecting-ip': '203.0.113.50' }), env, {})).toBe('203.0.113.50')
    })

    it('ignores CF-Connecting-IP anywhere else, where any client may send it', async () => {
      const { logger } = recorder()
      expect(await keyOf({ logger }, request({ 'cf-connecting-ip': '203.0.113.50' }))).toBe('unknown-ip')
    })
  })
})

describe('the client IP, from the options', () => {
  const bun = { requestIP: () => ({ address: '127.0.0.1' }) }

  it('takes the entry of X-Forwarded-For written by the nearest trusted proxy with trustProxy', async () => {
    const forwarded = request({ 'x-forwarded-for': '10.9.9.9, 198.51.100.7,203.0.113.1' })
    expect(await keyOf({ trustProxy: 1 }, forwarded, bun)).toBe('203.0.113.1')
    expect(await keyOf({ trustProxy: 2 }, forwarded, bun)).toBe('198.51.100.7')
    expect(await keyOf({ trustProxy: 5 }, forwarded, bun)).toBe('10.9.9.9')
    expect(await keyOf({ trustProxy: 1 }, request(), bun)).toBe('127.0.0.1')
  })

  it('calls ip with what the handler received, before anything else', async () => {
    const ip = jest.fn((r: Request, ...rest: unknown[]) => r.headers.get('x-real-ip') ?? (rest[0] as { ip: string }).ip)
    expect(await keyOf({ ip, trustProxy: 1 }, request({ 'x-real-ip': '203.0.113.9', 'x-forwarded-for': '1.2.3.4' }), { ip: '' })).toBe(
      '203.0.113.9',
    )
    expect(await keyOf({ ip }, request(), { ip: '198.51.100.1' })).toBe('198.51.100.1')
    expect(ip).toHaveBeenLastCalledWith(expect.any(Request), { ip: '198.51.100.1' })
  })

  it('keys by the key option alone when there is one, with no IP needed', async () => {
    const { logger, lines } = recorder()
    expect(await keyOf({ key: (r) => r.headers.get('x-api-key') ?? 'anonymous', logger }, request({ 'x-api-key': 'k1' }))).toBe('k1')
    expect(lines).toEqual([])
  })
})

describe('a request without a client IP', () => {
  it('counts in one shared bucket and says once, at the first such request, which options give a key', async () => {
    const { logger, lines } = recorder()
    const limit = rateLimit({ max: 2, window: '1m', logger })
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) statuses.push((await limit(request())).response?.status ?? 200)
    expect(statuses).toEqual([200, 200, 429])
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      /could not resolve the client IP.*share one bucket, "unknown-ip".*pass key: \(request\) => …, ip: \(request\) => …/,
    )
  })

  it('warns once when X-Forwarded-For arrives and trustProxy is not set', async () => {
    const { logger, lines } = recorder()
    const limit = rateLimit({ logger })
    const bun = { requestIP: () => ({ address: '127.0.0.1' }) }
    for (let i = 0; i < 3; i++) await limit(request({ 'x-forwarded-for': `203.0.113.${i}` }), bun)
    expect(lines).toEqual([expect.stringMatching(/X-Forwarded-For but trustProxy is not set.*set trustProxy: <number of proxies/)])
  })
})
