import { createServer, type Server } from 'node:http'
import { connect } from 'node:net'
import { rateLimit } from '@tollgate/express'
import { expressIp } from '@tollgate/express/internal'
import express from 'express'
import express4 from 'express4'
import { close, listen } from '../support/http'

// @tollgate/express reads the client address with expressIp, not Express's req.ip getter (which
// runs proxy-addr on every read). These tests hold the two to the same answer over real HTTP, for
// every kind of "trust proxy" setting and every shape of X-Forwarded-For, on Express 5 and 4.

const quiet = { warn: () => {}, error: () => {} }

const SETTINGS: [string, unknown][] = [
  ['not set', undefined],
  ['false', false],
  ['true', true],
  ['a hop count of 1', 1],
  ['a hop count of 2', 2],
  ["'loopback'", 'loopback'],
  ["'127.0.0.1'", '127.0.0.1'],
  ["'loopback, 10.0.0.0/8'", 'loopback, 10.0.0.0/8'],
  ["['loopback', 'uniquelocal']", ['loopback', 'uniquelocal']],
  ["'203.0.113.0/24'", '203.0.113.0/24'],
]

// The header shapes proxy-addr meets: none, empty, one address, a chain, spaces and empty entries,
// IPv6 and IPv4-mapped addresses, trusted addresses inside the chain, things that are not addresses.
const HEADERS: (string | undefined)[] = [
  undefined,
  '',
  '198.51.100.7',
  '10.1.2.3',
  '198.51.100.7, 10.1.2.3',
  '10.9.9.9,127.0.0.1',
  '198.51.100.7, 10.1.2.3, 127.0.0.5',
  '  198.51.100.7  ',
  '198.51.100.7,, 10.1.2.3 ,',
  ' , ,',
  'a b, c',
  '2001:db8::1',
  '::ffff:10.0.0.1, ::1',
  'not-an-ip',
  '198.51.100.7,not-an-ip',
]

/** A raw request from 127.0.0.1, so the header goes exactly as written (or not at all); the whole response. */
function raw(url: string, header: string | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(url).port), '127.0.0.1')
    let text = ''
    socket.setEncoding('utf8')
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer from ${url}`)))
    socket.on('data', (chunk) => {
      text += chunk
    })
    socket.on('end', () => resolve(text))
    socket.on('error', reject)
    const line = header === undefined ? '' : `X-Forwarded-For: ${header}\r\n`
    socket.end(`GET / HTTP/1.1\r\nHost: localhost\r\n${line}Connection: close\r\n\r\n`)
  })
}

/** The JSON body of a raw request's answer. */
async function ask(url: string, header: string | undefined): Promise<Record<string, unknown>> {
  const text = await raw(url, header)
  return JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))
}

describe.each([
  ['Express 5', express],
  ['Express 4', express4 as unknown as typeof express],
])('the client address on %s', (_name, makeApp) => {
  function app(setting: unknown): express.Express {
    const a = makeApp()
    if (setting !== undefined) a.set('trust proxy', setting)
    a.use(rateLimit({ max: 1000, ipv6Subnet: false, logger: quiet }))
    a.get('/', (req, res) => void res.json({ ip: req.ip ?? null, ours: expressIp(req) ?? null, key: req.rateLimit?.key ?? null }))
    return a
  }

  it.each(SETTINGS)('is the address req.ip gives, "trust proxy" %s, for every shape of X-Forwarded-For', async (_label, setting) => {
    const server = createServer(app(setting))
    const port = await listen(server)
    try {
      for (const header of HEADERS) {
        // Twice: the second read of a socket address is the remembered verdict.
        for (let round = 0; round < 2; round++) {
          const answer = await ask(port, header)
          expect({ header, ours: answer.ours }).toEqual({ header, ours: answer.ip })
          expect(typeof answer.ip).toBe('string')
        }
      }
    } finally {
      await close(server)
    }
  })

  it('counts the client req.ip names behind a trusted proxy, one limit per client', async () => {
    const a = makeApp()
    a.set('trust proxy', 'loopback')
    a.use(rateLimit({ max: 2, window: '1 minute', logger: quiet }))
    a.get('/', (req, res) => void res.json({ ip: req.ip, key: req.rateLimit?.key }))
    const server = createServer(a)
    const port = await listen(server)
    try {
      const first = await ask(port, '198.51.100.7')
      expect(first).toMatchObject({ ip: '198.51.100.7', key: '198.51.100.7' })
      await ask(port, '198.51.100.7')
      // The third request of that client is refused; another client behind the same proxy is not.
      const refused = await raw(port, '198.51.100.7')
      expect(refused.startsWith('HTTP/1.1 429')).toBe(true)
      expect(await ask(port, '198.51.100.8')).toMatchObject({ ip: '198.51.100.8', key: '198.51.100.8' })
    } finally {
      await close(server)
    }
  })

  it('asks a compiled "trust proxy" about a socket address once, where req.ip asks on every read', async () => {
    const a = makeApp()
    a.set('trust proxy', 'loopback')
    const compiled = a.get('trust proxy fn') as (address: string, hop: number) => boolean
    let asked = 0
    // Express's own function, counted: what it answers is unchanged.
    a.set('trust proxy fn', (address: string, hop: number) => {
      asked++
      return compiled(address, hop)
    })
    a.get('/', (req, res) => {
      const before = asked
      const ours = expressIp(req)
      const byUs = asked - before
      const ip = req.ip
      res.json({ ip, ours, byUs, byGetter: asked - before - byUs })
    })
    const server = createServer(a)
    const url = await listen(server)
    try {
      const answers = [await ask(url, '198.51.100.7'), await ask(url, '198.51.100.8'), await ask(url, '198.51.100.9')]
      expect(answers.map((x) => x.ours)).toEqual(['198.51.100.7', '198.51.100.8', '198.51.100.9'])
      expect(answers.map((x) => x.ip)).toEqual(['198.51.100.7', '198.51.100.8', '198.51.100.9'])
      expect(answers.map((x) => x.byGetter)).toEqual([1, 1, 1])
      expect(answers.map((x) => x.byUs)).toEqual([1, 0, 0])
    } finally {
      await close(server)
    }
  })

  it("asks the app's own trust function every time, with the arguments and in the order proxy-addr does", async () => {
    const calls: [string, number][] = []
    const a = makeApp()
    a.set('trust proxy', (address: string, hop: number) => {
      calls.push([address, hop])
      return address === '127.0.0.1' || address === '10.1.2.3'
    })
    a.get('/', (req, res) => {
      calls.length = 0
      const ip = req.ip
      const theirs = calls.splice(0)
      const ours = expressIp(req)
      res.json({ ip, ours, same: JSON.stringify(theirs) === JSON.stringify(calls), calls: calls.length })
    })
    const server = createServer(a)
    const port = await listen(server)
    try {
      for (const header of ['198.51.100.7, 10.1.2.3', '198.51.100.7, 10.1.2.3', ' , ', '10.1.2.3', undefined]) {
        const answer = await ask(port, header)
        expect(answer.ours).toBe(answer.ip)
        expect(answer.same).toBe(true)
      }
    } finally {
      await close(server)
    }
  })

  it('reads an ip the app defines itself, on app.request or on the request', async () => {
    const a = makeApp()
    a.set('trust proxy', 'loopback')
    Object.defineProperty(a.request, 'ip', { get: () => '192.0.2.1', configurable: true })
    const own = makeApp()
    own.use((req, _res, next) => {
      Object.defineProperty(req, 'ip', { value: '192.0.2.2' })
      next()
    })
    for (const [server, expected] of [
      [createServer(a), '192.0.2.1'],
      [createServer(own), '192.0.2.2'],
    ] as [Server, string][]) {
      const appOf = server.listeners('request')[0] as express.Express
      appOf.get('/', (req, res) => void res.json({ ip: req.ip, ours: expressIp(req), key: null }))
      const port = await listen(server)
      try {
        expect(await ask(port, '198.51.100.7')).toEqual({ ip: expected, ours: expected, key: null })
      } finally {
        await close(server)
      }
    }
  })
})
