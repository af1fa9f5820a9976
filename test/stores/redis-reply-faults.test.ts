import { execFileSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { Limiter, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { type RedisServer, startRedisServer } from '../harness/redis-server'
import type { ProxiedConnection, TcpProxy } from '../support/tcp-proxy'
import { startTcpProxy } from '../support/tcp-proxy'
import { sleep } from '../support/time'

// Faults a network or a broken proxy makes between the store and Redis, through a real TCP proxy in
// front of this file's own redis-server: a connection that goes silent without closing (a half-open
// socket), and a reply nobody asked for. The store must neither keep sending into the silence nor hand
// a client a count that answered another call.

let redis: RedisServer
let proxy: TcpProxy
const clients: Redis[] = []

beforeAll(async () => {
  redis = await startRedisServer()
})
beforeEach(async () => {
  proxy = await startTcpProxy({ host: '127.0.0.1', port: redis.port })
})
afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect()
  await proxy.close()
})
afterAll(async () => {
  await redis.stop()
})

async function proxiedClient(): Promise<Redis> {
  const client = new Redis({ host: proxy.host, port: proxy.port })
  client.on('error', () => {}) // the resets below are expected
  clients.push(client)
  await client.ping()
  return client
}

/** Waits (bounded) for the proxied connection that named itself `tollgate`: the store's own. */
async function ownConnection(): Promise<ProxiedConnection> {
  const until = Date.now() + 5000
  for (;;) {
    const own = proxy.connections.find((c) => !c.isClosed && /SETNAME\r\n\$8\r\ntollgate/.test(c.sent))
    if (own !== undefined) return own
    if (Date.now() > until) throw new Error('the store opened no connection of its own')
    await sleep(10)
  }
}

/** The kernel's view of the socket on local port `port` of this process (`ss`), with its timers. */
function socketState(port: number): string {
  return execFileSync('ss', ['-tnoH', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' })
}

describe("the store's own connection, silently blackholed while the client's is healthy", () => {
  it('has TCP keep-alive, and store decisions resume through the client within 2 s', async () => {
    const client = await proxiedClient()
    const limiter = new Limiter({
      max: 1_000_000,
      window: 60_000,
      prefix: `blackhole-${randomUUID()}:`,
      store: new RedisStore({ client, ownConnection: true }), // the default 50 ms deadline
      logger: { warn() {}, error() {} },
    })
    const own = await ownConnection()
    const port = own.client.remotePort!
    expect(socketState(port)).toMatch(/timer:\(keepalive,/)
    expect((await limiter.consume('c')).source).toBe('store')
    expect(own.sent).toMatch(/MULTI/) // the transaction went on the store's own connection

    // Silent from now on, and so is every connection the store opens anew (the path drops the store's
    // flows only): the client's own connection alone carries the store's transactions.
    own.blackhole()
    for (let i = proxy.connections.length; i < 20; i++) void proxy.connection(i).then((c) => c.blackhole())
    const clientSentBefore = proxy.connections[0]!.sent.length
    const t0 = performance.now()
    const sources: string[] = []
    let resumedAt: number | undefined
    while (performance.now() - t0 < 5000 && resumedAt === undefined) {
      const decision = await limiter.consume('c')
      sources.push(decision.source)
      if (decision.source === 'store' && sources.some((s) => s !== 'store')) resumedAt = performance.now() - t0
      await sleep(10)
    }
    expect(sources).toContain('fallback') // the silence was noticed: the first call missed its deadline
    expect(resumedAt).toBeLessThan(2000)
    // The store closed the silent socket instead of writing on into it, and its transactions went to the client.
    expect(own.isClosed).toBe(true)
    expect(proxy.connections[0]!.sent.slice(clientSentBefore)).toMatch(/multi/i)
  })
})

/** `rounds` increments of one key, one at a time; in round `at`, `inject` once the transaction is on the wire. */
async function countWithInjection(
  store: RedisStore,
  key: string,
  rounds: number,
  at: number,
  inject: () => void,
): Promise<Array<number | Error>> {
  const now = Date.now()
  const results: Array<number | Error> = []
  for (let round = 1; round <= rounds; round++) {
    const pending = store.increment(key, 1, 60_000, now)
    if (round === at) {
      await new Promise((resolve) => setImmediate(resolve)) // after the batcher's flush: the transaction is written
      inject()
    }
    results.push(await pending.catch((error: Error) => error))
  }
  return results
}

/** Every count a call was given is the one Redis returned for it: 1..rounds in call order, the failed calls' counts skipped. */
function expectExactCounts(results: Array<number | Error>, failedRound: number): void {
  const counts = results.filter((r): r is number => typeof r === 'number')
  const failed = results.flatMap((r, i) => (r instanceof Error ? [i + 1] : []))
  expect(failed).toEqual([failedRound])
  expect(results[failedRound - 1]).toMatchObject({ code: 'TG_STORE_ERROR', message: expect.stringMatching(/protocol error/) })
  expect(counts).toEqual(results.map((_, i) => i + 1).filter((n) => n !== failedRound))
}

describe('an extra reply injected into the connection a transaction is on', () => {
  const ROUNDS = 30
  const AT = 10

  it.each([
    ['written onto the client’s connection', ':1\r\n', false],
    ['written onto the client’s connection', '+OK\r\n', false],
    ['sent through client.multi()', ':1\r\n', true],
  ])(
    '%s (%j): fails that transaction’s calls, resets the client’s connection, and no call gets another’s count',
    async (_, extra, viaMulti) => {
      const client = await proxiedClient()
      const store = new RedisStore({ client, timeout: '2s' })
      const key = `inject-${randomUUID()}`
      await store.increment(`${key}-warm`, 1, 60_000, Date.now()) // the store's checks and script loads go first
      const spy = viaMulti ? jest.spyOn(client, 'multi') : undefined
      try {
        const connection = proxy.connections[0]!
        const results = await countWithInjection(store, key, ROUNDS, AT, () => connection.inject(extra))
        expectExactCounts(results, AT)
        if (viaMulti) expect(spy).toHaveBeenCalled()
        // The reply stream was out of step: that connection was dropped and ioredis connected anew.
        expect(connection.isClosed).toBe(true)
        expect(proxy.connections.filter((c) => !c.isClosed)).toHaveLength(1)
        expect(Number(await client.get(`${key}:${Math.floor(Date.now() / 60_000)}`))).toBe(ROUNDS)
      } finally {
        spy?.mockRestore()
      }
    },
  )

  it.each([
    ['while a transaction waits', ':1\r\n', true],
    ['while a transaction waits', '+QUEUED\r\n', true],
    ['while nothing waits', '+OK\r\n', false],
  ])(
    'on the store’s own connection, %s (%j): closes it, fails only the calls on it, and counts on through the client',
    async (_, extra, inFlight) => {
      const client = await proxiedClient()
      const store = new RedisStore({ client, timeout: '2s', ownConnection: true })
      const own = await ownConnection()
      const key = `inject-own-${randomUUID()}`
      const now = Date.now()
      if (inFlight) {
        const results = await countWithInjection(store, key, ROUNDS, AT, () => own.inject(extra))
        expectExactCounts(results, AT)
      } else {
        expect(await store.increment(key, 1, 60_000, now)).toBe(1)
        own.inject(extra)
        await own.closed()
        expect(await store.increment(key, 1, 60_000, now)).toBe(2) // through the client meanwhile
      }
      expect(own.isClosed).toBe(true)
      // The client's connection was not touched, and the store reopens its own after a backoff.
      expect(proxy.connections[0]!.isClosed).toBe(false)
      const until = Date.now() + 3000
      while (proxy.connections.filter((c) => !c.isClosed).length < 2 && Date.now() < until) await sleep(20)
      expect(proxy.connections.filter((c) => !c.isClosed)).toHaveLength(2)
    },
  )
})
