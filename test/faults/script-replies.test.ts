import { type AlgorithmName, type Duration, RedisStore } from '@tollgate/core'
import type { LimitSpec, StoreCall, StoreResult } from '@tollgate/core/store'
import { Redis } from 'ioredis'
import type { RedisClientType } from 'redis'
import { closeNodeRedis, newNodeRedisClient, quitClient, testPrefix } from '../harness/redis'
import type { RedisServer } from '../harness/redis-server'
import { startTestServer, testServers } from '../harness/servers'
import { limitSpec, storeCall } from '../support/store-calls'
import { type ProxiedConnection, startTcpProxy, type TcpProxy } from '../support/tcp-proxy'
import { sleep } from '../support/time'

// The scripts' replies against a network that loses or adds replies, through a TCP proxy in front of
// a redis-server of this file's own, on every server line of the matrix: a connection cut after Redis ran a batch of scripts (ioredis then
// sends them again once reconnected) must not count any call twice, and an extra reply on the stream
// must fail the calls it reaches and reset the connection, never answer a call with another's numbers.

/** An ioredis client through the proxy, as an app has one (its defaults: resend after a reconnect on). */
async function proxiedIoredis(proxy: TcpProxy): Promise<Redis> {
  const client = new Redis({ host: proxy.host, port: proxy.port, disconnectTimeout: 0 })
  client.on('error', () => {})
  await client.ping()
  return client
}

/**
 * A RedisStore on a client of `kind` through a TCP proxy of its own, made in `beforeAll` and closed in `afterAll`;
 * read its parts inside a test or hook.
 */
function useProxiedStore(server: () => RedisServer, kind: string, timeout: Duration) {
  let proxy: TcpProxy | undefined
  let io: Redis | undefined
  let node: RedisClientType | undefined
  let store: RedisStore | undefined
  beforeAll(async () => {
    proxy = await startTcpProxy(server())
    if (kind === 'ioredis') io = await proxiedIoredis(proxy)
    else node = await newNodeRedisClient(`redis://${proxy.host}:${proxy.port}`)
    store = new RedisStore({ client: (io ?? node)!, timeout })
  })
  afterAll(async () => {
    io?.disconnect()
    closeNodeRedis(node)
    await proxy?.close()
  })
  return {
    get proxy() {
      return proxy!
    },
    get store() {
      return store!
    },
    ping: () => (io !== undefined ? io.ping() : node!.ping()),
  }
}

describe.each(testServers())('on $name', (server) => {
  const MINUTE = 60_000
  let redis: RedisServer
  let admin: Redis
  /** Every script call Redis ran, as seen by MONITOR: [command, its arguments]. */
  const ran: string[][] = []
  let monitor: Redis | undefined

  beforeAll(async () => {
    ran.length = 0
    redis = await startTestServer(server)
    admin = new Redis(redis.url, { disconnectTimeout: 0 })
    monitor = await admin.monitor()
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (/^eval(sha)?$/i.test(args[0] ?? '')) ran.push(args)
    })
  })
  afterAll(async () => {
    monitor?.disconnect()
    await quitClient(admin)
    await redis?.stop()
  })

  /** Resolves once MONITOR has shown every command Redis ran before this call. */
  async function monitorCaughtUp(): Promise<void> {
    const mark = `mark:${Math.random()}`
    const seen = new Promise<void>((resolve) => {
      const on = (_time: string, args: string[]) => {
        if (args.includes(mark)) {
          monitor!.off('monitor', on)
          resolve()
        }
      }
      monitor!.on('monitor', on)
    })
    await admin.get(mark)
    await seen
  }

  /** How many times Redis ran each of `calls` (matched by the call id among a script's arguments). */
  function runsOf(calls: StoreCall[]): number[] {
    return calls.map((call) => ran.filter((args) => args.includes(call.id)).length)
  }

  /** The client's live connection through the proxy once it is idle (the store's checks after a connect answered). */
  async function idleConnection(proxy: TcpProxy, ping: () => Promise<unknown>): Promise<ProxiedConnection> {
    for (let i = 0; i < 200; i++) {
      const last = proxy.connections[proxy.connections.length - 1]
      if (last !== undefined && !last.isClosed) {
        await sleep(20)
        await ping()
        if (!last.isClosed) return last
      }
      await sleep(10)
    }
    throw new Error('the client did not reconnect through the proxy')
  }

  // ioredis sends again what was in flight (its default); node-redis fails it, and never runs a call twice.
  describe.each(['ioredis', 'node-redis'])('a connection cut after Redis ran a batch of scripts, %s', (kind) => {
    const setup = useProxiedStore(() => redis, kind, '5s')
    /** What a resend does here: ioredis runs calls a second time, node-redis never does. */
    const expectResends = (resent: number) => (kind === 'ioredis' ? expect(resent).toBeGreaterThan(0) : expect(resent).toBe(0))

    /** What each algorithm has counted for a key, read straight from Redis: the units it holds. */
    const counted: Record<string, (key: string, now: number) => Promise<number>> = {
      'sliding-window': async (key, now) => Number((await admin.hget(`${key}:${Math.floor(now / MINUTE)}`, 'n')) ?? 0),
      // Two limits: the script path of the fixed window; the first limit's counter.
      'fixed-window': async (key, now) => Number((await admin.hget(`${key}:1m:${Math.floor(now / MINUTE)}`, 'n')) ?? 0),
      // Entries only: the log's head holds a marker of its TTL, scored below 0.
      'sliding-log': async (key) => admin.zcount(`${key}:log`, 0, '+inf'),
      // One unit is 1 ms of TAT (window = max), counted from `now`.
      gcra: async (key, now) => {
        const stored = await admin.hget(`${key}:gcra`, 't')
        return stored === null ? 0 : Number(stored.split(':')[0]) - now
      },
    }
    const limitsOf = (algorithm: string): LimitSpec[] =>
      algorithm === 'fixed-window'
        ? [limitSpec(10_000, MINUTE, 10_000, '1m'), limitSpec(10_000, 2 * MINUTE, 10_000, '2m')]
        : [limitSpec(MINUTE, MINUTE, 10_000)]

    /** `send` for every call at once, the connection cut on the first reply back; what each returned. */
    async function cutMidBatch<T>(calls: StoreCall[], send: (call: StoreCall) => Promise<T>): Promise<PromiseSettledResult<T>[]> {
      const connection = await idleConnection(setup.proxy, setup.ping)
      connection.cutOnNextReply()
      const settled = await Promise.allSettled(calls.map(send))
      expect(connection.isClosed).toBe(true)
      await monitorCaughtUp()
      return settled
    }

    it.each(['sliding-window', 'fixed-window', 'gcra', 'sliding-log'])(
      '%s: no admit counts twice over 20 resets, and each answers its own count',
      async (name) => {
        const algorithm = name as AlgorithmName
        const prefix = testPrefix('resend')
        let resent = 0
        for (let round = 0; round < 20; round++) {
          const key = `${prefix}{c${round}}`
          const now = Date.now()
          const calls = Array.from({ length: 30 }, () => storeCall(algorithm, key, limitsOf(algorithm), 1, now))
          const settled = await cutMidBatch(calls, (call) => setup.store.admit(call))
          const runs = runsOf(calls)
          resent += runs.filter((n) => n > 1).length
          // Every call that ran is counted once, however often it ran.
          expect(await counted[algorithm]!(key, now)).toBe(runs.filter((n) => n > 0).length)
          // A call run once is answered with its own place in the count: no two such calls got the same one.
          const once = settled.filter((s, i) => s.status === 'fulfilled' && runs[i] === 1)
          const places = once.map((s) => (s as PromiseFulfilledResult<StoreResult>).value.values[1])
          expect(new Set(places).size).toBe(places.length)
          // A call run again, admitted by its first run, is answered admitted (its units counted once).
          settled.forEach((s, i) => {
            if (s.status === 'fulfilled' && runs[i]! > 1) expect(s.value.allowed).toBe(true)
          })
        }
        // The test meant something: through ioredis, Redis did run calls a second time.
        expectResends(resent)
      },
    )

    it('no refund undoes its call twice over 5 resets', async () => {
      const prefix = testPrefix('refund')
      let resent = 0
      for (let round = 0; round < 5; round++) {
        const key = `${prefix}{r${round}}`
        const now = Date.now()
        const calls = Array.from({ length: 60 }, () => storeCall('sliding-window', key, limitsOf('sliding-window'), 1, now))
        for (const call of calls) await setup.store.admit(call)
        const refunds = calls.slice(0, 20)
        const before = ran.length
        await cutMidBatch(refunds, (call) => setup.store.refund(call))
        const runs = refunds.map((call) => ran.slice(before).filter((args) => args.includes(call.id)).length)
        resent += runs.filter((n) => n > 1).length
        expect(await counted['sliding-window']!(key, now)).toBe(60 - runs.filter((n) => n > 0).length)
      }
      expectResends(resent)
    })
  })

  /** An admit reply of another call, as a broken proxy might repeat one. */
  const EXTRA_REPLY = '*4\r\n$13\r\nsomeone-else1\r\n:1\r\n:1000\r\n:1001\r\n'

  describe.each(['ioredis', 'node-redis'])('an extra reply on the script path, %s', (kind) => {
    const setup = useProxiedStore(() => redis, kind, '2s')

    it('fails the calls it reaches and resets the connection, never answering a call with numbers of another', async () => {
      const key = `${testPrefix('extra')}{one}`
      // GCRA with one unit = 1 ms of TAT: a call of cost c is answered [TAT before, TAT before + c],
      // so a reply of any other call (another cost) shows.
      const limits = [limitSpec(MINUTE, MINUTE, 100_000)]
      let failed = 0
      for (let round = 0; round < 5; round++) {
        const connection = await idleConnection(setup.proxy, setup.ping)
        const calls = Array.from({ length: 30 }, (_, i) => storeCall('gcra', key, limits, i + 1, Date.now()))
        // Ahead of the reply to the turn's batch (the store sends the turn's admits in one script call).
        connection.injectBeforeNextReply(EXTRA_REPLY)
        const pending = Promise.allSettled(calls.map((call) => setup.store.admit(call)))
        const settled = await pending
        settled.forEach((s, i) => {
          if (s.status === 'fulfilled') expect([i, s.value.values[1]! - s.value.values[0]!]).toEqual([i, calls[i]!.cost])
          else {
            failed++
            expect(String(s.reason)).toMatch(/protocol error.*TG_STORE_ERROR/)
          }
        })
        // The connection the replies went out of step on is gone; a fresh one answers in step.
        for (let i = 0; i < 100 && !connection.isClosed; i++) await sleep(10)
        expect(connection.isClosed).toBe(true)
        await idleConnection(setup.proxy, setup.ping)
        const after = storeCall('gcra', key, limits, 7, Date.now())
        const result = await setup.store.admit(after)
        expect(result.values[1]! - result.values[0]!).toBe(7)
      }
      expect(failed).toBeGreaterThan(0)
    })
  })
})
