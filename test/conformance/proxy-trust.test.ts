import { randomInt } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { Logger } from '@tollgate/core'
import { rateLimit as expressLimit } from '@tollgate/express'
import { rateLimit as fastifyLimit } from '@tollgate/fastify'
import { rateLimit as koaLimit } from '@tollgate/koa'
import express from 'express'
import Fastify, { type FastifyServerOptions } from 'fastify'
import Koa from 'koa'
import { close, get, listen } from '../support/http'

// Proxy safety: a framework that keys by the leftmost X-Forwarded-For entry lets a client
// pick its own key. The client sits behind one proxy on loopback, which appends the address it saw to
// whatever the client sent; the client sends a fresh address on every request.

function recorder() {
  const lines: string[] = []
  const logger: Logger = { warn: (m) => void lines.push(m), error: (m) => void lines.push(m) }
  return { lines, logger }
}

const LIMIT = { max: 3, window: '1 minute' } as const

// Each server answers with the IP the framework resolved, the key Tollgate counted.
function expressServer(trust: unknown, logger: Logger): Promise<Server> {
  const app = express()
  app.set('trust proxy', trust)
  app.use(expressLimit({ ...LIMIT, logger }))
  app.get('/', (req, res) => void res.send(req.ip))
  return Promise.resolve(createServer(app))
}

async function fastifyServer(trust: unknown, logger: Logger): Promise<Server> {
  // Since 5.12.1 fastify's types leave out the hop count it still accepts (and ignores) at run time.
  const app = Fastify({ trustProxy: trust as FastifyServerOptions['trustProxy'] })
  await app.register(fastifyLimit, { ...LIMIT, logger })
  app.get('/', async (request) => request.ip)
  await app.ready()
  return app.server
}

/** `trust` is app.maxIpsCount, with app.proxy on; `true` leaves maxIpsCount at its default 0. */
function koaServer(trust: unknown, logger: Logger, proxyIpHeader?: string): Promise<Server> {
  const app = new Koa({ proxy: true, ...(proxyIpHeader === undefined ? {} : { proxyIpHeader }) })
  if (typeof trust === 'number') app.maxIpsCount = trust
  app.use(koaLimit({ ...LIMIT, logger }))
  app.use((ctx) => {
    ctx.body = ctx.ip
  })
  return Promise.resolve(createServer(app.callback()))
}

// The proxy saw the client either as 127.0.0.1 (a client on this host, as in the original report) or as
// 198.51.100.7, so trusting loopback addresses trusts the proxy and not the client.
const LOCAL_CLIENT = '127.0.0.1'
const REMOTE_CLIENT = '198.51.100.7'

interface Fix {
  setting: string
  trust: unknown
  client: string
}

const frameworks: Array<{
  name: string
  permissive: string
  build: (trust: unknown, logger: Logger) => Promise<Server>
  advice: RegExp
  fixes: Fix[]
}> = [
  {
    name: 'Express',
    permissive: `"trust proxy" true`,
    build: expressServer,
    advice: /^Tollgate: Express "trust proxy" is true.*leftmost X-Forwarded-For.*app\.set\('trust proxy', <number of proxies>\)/,
    fixes: [
      { setting: `"trust proxy" 1`, trust: 1, client: LOCAL_CLIENT },
      { setting: `"trust proxy" "loopback"`, trust: 'loopback', client: REMOTE_CLIENT },
    ],
  },
  {
    name: 'Fastify',
    permissive: 'trustProxy true',
    build: fastifyServer,
    advice: /^Tollgate: the fastify trustProxy option is true.*leftmost X-Forwarded-For.*trustProxy: '<proxy IPs or CIDRs>'/,
    fixes: [
      { setting: `trustProxy "127.0.0.1"`, trust: '127.0.0.1', client: REMOTE_CLIENT },
      // A client on the proxy's own host: only the first hop is the proxy.
      {
        setting: 'a trustProxy function trusting 127.0.0.1 as the first hop only',
        trust: (address: string, hop: number) => hop === 0 && address === '127.0.0.1',
        client: LOCAL_CLIENT,
      },
    ],
  },
  {
    name: 'Koa',
    permissive: 'app.proxy on, maxIpsCount 0',
    build: koaServer,
    advice: /^Tollgate: a request carried X-Forwarded-For with 2 entries.*leftmost.*app\.maxIpsCount = <number of proxies in front of Koa>/,
    fixes: [
      { setting: 'app.maxIpsCount 1', trust: 1, client: LOCAL_CLIENT },
      { setting: 'app.maxIpsCount 1', trust: 1, client: REMOTE_CLIENT },
    ],
  },
]

/** Sends `n` requests through the simulated proxy, each claiming a new client address; `keys` are the IPs admitted. */
async function rotate(url: string, n: number, client: string, header = 'X-Forwarded-For') {
  const replies = []
  for (let i = 0; i < n; i++) {
    const claimed = `10.${randomInt(256)}.${randomInt(256)}.${i}`
    replies.push(await get(url, { headers: { [header]: `${claimed}, ${client}` } }))
  }
  const admitted = replies.filter((r) => r.status === 200)
  return { statuses: replies.map((r) => r.status), keys: new Set(admitted.map((r) => r.body)) }
}

async function withServer<T>(server: Server, run: (url: string) => Promise<T>): Promise<T> {
  const url = await listen(server)
  try {
    return await run(url)
  } finally {
    await close(server)
  }
}

describe.each(frameworks)('$name behind one proxy', ({ permissive, build, advice, fixes }) => {
  it(`with ${permissive}, never limits a client rotating X-Forwarded-For, and warns once naming the setting to fix`, async () => {
    const { lines, logger } = recorder()
    const { statuses, keys } = await withServer(await build(true, logger), (url) => rotate(url, 8, LOCAL_CLIENT))
    expect(statuses).toEqual(Array(8).fill(200))
    expect(keys.size).toBe(8)
    expect(lines).toEqual([expect.stringMatching(advice)])
  })

  it.each(fixes)(
    `with $setting, keys the client seen as $client and refuses its 4th request, logging nothing`,
    async ({ trust, client }) => {
      const { lines, logger } = recorder()
      const { statuses, keys } = await withServer(await build(trust, logger), (url) => rotate(url, 6, client))
      expect(statuses).toEqual([200, 200, 200, 429, 429, 429])
      expect([...keys]).toEqual([client])
      expect(lines).toEqual([])
    },
  )
})

describe('Koa with app.proxy on and maxIpsCount 0', () => {
  it('stays quiet for one-entry X-Forwarded-For (honest traffic through one proxy) and warns at the first longer one', async () => {
    const { lines, logger } = recorder()
    await withServer(await koaServer(true, logger), async (url) => {
      for (let i = 0; i < 3; i++) await get(url, { headers: { 'X-Forwarded-For': `198.51.100.${i}` } })
      expect(lines).toEqual([])
      await get(url, { headers: { 'X-Forwarded-For': '203.0.113.9, 198.51.100.7, 127.0.0.1' } })
      await get(url, { headers: { 'X-Forwarded-For': '203.0.113.8, 127.0.0.1' } })
    })
    expect(lines).toEqual([expect.stringMatching(/X-Forwarded-For with 3 entries.*app\.maxIpsCount is 0/)])
  })

  it('names the proxy header Koa is told to read', async () => {
    const { lines, logger } = recorder()
    await withServer(await koaServer(true, logger, 'X-Real-IP'), (url) => rotate(url, 1, LOCAL_CLIENT, 'X-Real-IP'))
    expect(lines).toEqual([expect.stringMatching(/^Tollgate: a request carried X-Real-IP with 2 entries/)])
  })

  it('tells an app that does not trust proxies to set app.proxy and app.maxIpsCount', async () => {
    const { lines, logger } = recorder()
    const koa = new Koa()
    koa.use(koaLimit({ ...LIMIT, logger }))
    koa.use((ctx) => {
      ctx.body = 'ok'
    })
    await withServer(createServer(koa.callback()), (url) => get(url, { headers: { 'X-Forwarded-For': '203.0.113.9' } }))
    expect(lines).toEqual([expect.stringMatching(/does not trust proxies.*app\.proxy = true and app\.maxIpsCount = <number of proxies>/)])
  })
})

describe('Fastify with a hop-count trustProxy', () => {
  it('warns once when fastify ignores the count (5.12.1 and later), since every client then shares the proxy limit', async () => {
    const { lines, logger } = recorder()
    const { keys } = await withServer(await fastifyServer(1, logger), (url) => rotate(url, 3, REMOTE_CLIENT))
    if (keys.has(REMOTE_CLIENT)) {
      // A fastify that still honours hop counts keys the client correctly: nothing to warn about.
      expect(lines).toEqual([])
    } else {
      expect([...keys]).toEqual(['127.0.0.1'])
      expect(lines).toEqual([
        expect.stringMatching(/trustProxy option is a hop count \(1\), which this fastify ignores.*trustProxy: '<proxy IPs or CIDRs>'/),
      ])
    }
  })
})
