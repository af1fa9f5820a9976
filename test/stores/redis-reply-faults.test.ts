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

/** Matches the bytes of the store's own connection naming itself, as it does once its setup was answered. */
const NAMED = /SETNAME\r\n\$8\r\ntollgate/

/** Waits (bounded) for the proxied connection that named itself `tollgate`: the store's own. */
async function ownConnection(): Promise<ProxiedConnection> {
  const until = Date.now() + 5000
  for (;;) {
    const own = proxy.connections.find((c) => !c.isClosed && NAMED.test(c.sent))
    if (own !== undefined) return own
    if (Date.now() > until) throw new Error('the store opened no connection of its own')
    await sleep(10)
  }
}

/** The kernel's view of the socket on local port `port` of this process (`ss`), with its timers. */
function socketState(port: number): string {
  return execFileSync('ss', ['-tnoH', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' })
}

/**
 * The socket's timer once it shows keep-alive: while bytes are unacknowledged the kernel shows its
 * retransmission timer instead (`timer:(on,…)`), whatever keep-alive says, so it is read again for a
 * while (a loaded machine can leave a write unacknowledged for a moment).
 */
async function keepAliveState(port: number): Promise<string> {
  let state = socketState(port)
  for (let i = 0; i < 40 && !/timer:\(keepalive,/.test(state); i++) {
    await new Promise((r) => setTimeout(r, 50))
    state = socketState(port)
  }
  return state
}

/** Whether `connection` forwarded a transaction of the store's own connection (what a silenced one sent is not recorded). */
function carriedTransaction(connection: ProxiedConnection): boolean {
  return NAMED.test(connection.sent) && connection.sent.includes('MULTI')
}

const SILENCE_MS = 8000

describe("the store's own connection, silently blackholed for 8 s while the client's is healthy", () => {
  // Every connection the store opens during the silence is silenced too (the path drops the store's
  // flows only), either from its first byte or once it has answered its first command: a path that
  // lets a new connection's opening through and then drops it is what a reopen rule must not trust.
  it.each([
    ['from their first byte', (c: ProxiedConnection) => c.blackhole()],
    ['once they answered their first command', (c: ProxiedConnection) => c.blackholeAfterReply()],
  ])(
    'with its reopened connections silent %s: keep-alive on, the fallback decides at most 10% from +1 s, and it carries again after',
    async (_, silence) => {
      const client = await proxiedClient()
      const limiter = new Limiter({
        max: 1_000_000,
        window: 60_000,
        prefix: `blackhole-${randomUUID()}:`,
        store: new RedisStore({ client, transport: 'own-connection' }), // the default 50 ms deadline
        logger: { warn() {}, error() {} },
      })
      const own = await ownConnection()
      const port = own.client.remotePort!
      expect(await keepAliveState(port)).toMatch(/timer:\(keepalive,/)
      // Bounded: the connection is ready one round trip after it named itself.
      for (let i = 0; i < 100 && !own.sent.includes('MULTI'); i++) {
        expect((await limiter.consume('c')).source).toBe('store')
        await sleep(10)
      }
      expect(own.sent).toMatch(/MULTI/) // the transactions went on the store's own connection

      own.blackhole()
      let silencing = true
      const firstReopen = proxy.connections.length
      for (let i = firstReopen; i < firstReopen + 40; i++)
        void proxy.connection(i).then((c) => {
          if (silencing) silence(c)
        })
      const clientSentBefore = proxy.connections[0]!.sent.length
      // Decisions at a steady pace, not one after another: a decision that waits out its deadline then
      // weighs as much as one the client answers at once, so the share is a share of the time.
      const t0 = performance.now()
      const decisions: Array<Promise<{ at: number; source: string }>> = []
      for (let i = 0; i < 4000 && performance.now() - t0 < SILENCE_MS; i++) {
        const at = performance.now() - t0
        decisions.push(Promise.resolve(limiter.consume('c')).then((d) => ({ at, source: d.source })))
        await sleep(4)
      }
      silencing = false
      const silenceEnded = performance.now()
      const tries = proxy.connections.length - firstReopen
      const made = await Promise.all(decisions)

      const late = made.filter((d) => d.at >= 1000)
      const fellBack = late.filter((d) => d.source === 'fallback').length
      console.log(
        `fallback decided ${fellBack} of ${late.length} decisions from +1 s (${((100 * fellBack) / late.length).toFixed(1)}%); ${tries} reopen tries`,
      )
      expect(made.slice(0, 5).map((d) => d.source)).toContain('fallback') // the silence was noticed at the first deadlines
      const resumedAt = made.find((d, i) => d.source === 'store' && made.slice(0, i).some((e) => e.source !== 'store'))?.at
      expect(resumedAt).toBeLessThan(2000) // through the client
      expect(fellBack / late.length).toBeLessThanOrEqual(0.1)
      // It backs off instead of retrying: tries after waits of 1 and 2 s, each closed after a second of
      // silence, and the next wait (4 s) ends after the silence; one more for a slow machine.
      expect(tries).toBeLessThanOrEqual(3)
      // The store closed the silent socket instead of writing on into it, and its transactions went to the client.
      expect(own.isClosed).toBe(true)
      expect(proxy.connections[0]!.sent.slice(clientSentBefore)).toMatch(/multi/i)

      // Back in use once a try comes after the silence: the try under way when it ends is closed after a
      // second of silence at most, and the wait then in force is 8 s at most by the schedule above.
      let backAfter: number | undefined
      for (let i = 0; i < 1000 && backAfter === undefined && performance.now() - silenceEnded < 12_000; i++) {
        await limiter.consume('c')
        if (proxy.connections.slice(firstReopen).some(carriedTransaction)) backAfter = performance.now() - silenceEnded
        else await sleep(10)
      }
      console.log(`the own connection carried transactions again ${backAfter?.toFixed(0)} ms after the silence ended`)
      expect(backAfter).toBeLessThan(10_000)
      expect((await limiter.consume('c')).source).toBe('store')
    },
    40_000,
  )
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
      const store = new RedisStore({ client, timeout: '2s', transport: 'own-connection' })
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
