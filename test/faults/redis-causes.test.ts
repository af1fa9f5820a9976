import { randomUUID } from 'node:crypto'
import { type AlgorithmName, Limiter, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { keysWithoutTtl, quitClient, testPrefix } from '../harness/redis'
import type { RedisServer } from '../harness/redis-server'
import { startTlsRedisServer, type TlsRedisServer } from '../harness/redis-tls'
import { startTestServer, testServers } from '../harness/servers'

// A failure's real cause is what the log names: OOM when Redis is full (not only
// "EXECABORT"), the certificate error when TLS fails (not only "did not answer within 50 ms"); and an
// evicting maxmemory-policy is warned about once.

let quiet: jest.SpyInstance
beforeAll(() => {
  quiet = jest.spyOn(process, 'emitWarning').mockImplementation(() => {})
})
afterAll(() => quiet.mockRestore())

function collectingLimiter(store: RedisStore, algorithm: AlgorithmName, prefix: string) {
  const errors: string[] = []
  const logger = { warn: () => {}, error: (message: string) => void errors.push(message) }
  return { limiter: new Limiter({ store, algorithm, prefix, logger, max: 5, window: '1m' }), errors }
}

describe.each(testServers())('on $name', (server) => {
  describe('a Redis at maxmemory with noeviction', () => {
    let redis: RedisServer
    let admin: Redis
    let client: Redis
    beforeAll(async () => {
      redis = await startTestServer(server, { extraArgs: () => ['--maxmemory', '4mb', '--maxmemory-policy', 'noeviction'] })
      admin = new Redis(redis.url)
      client = new Redis(redis.url)
    })

    /** Fills Redis with 16 KB values until it refuses one (bounded: 4 MB is reached long before 1000 of them). */
    async function fill(): Promise<void> {
      const big = 'x'.repeat(16 * 1024)
      for (let i = 0; i < 1000; i++) {
        try {
          await admin.set(`fill:${randomUUID()}`, big)
        } catch (error) {
          if (/OOM/.test((error as Error).message)) return
          throw error
        }
      }
      throw new Error('Redis never refused a write: maxmemory not reached')
    }
    afterAll(async () => {
      await quitClient(client)
      await quitClient(admin)
      await redis?.stop()
    })

    it.each(['fixed-window', 'sliding-window', 'gcra', 'sliding-log'] as const)(
      'names OOM as the cause (%s) and writes no key',
      async (algorithm) => {
        const prefix = testPrefix('oom')
        await fill()
        const { limiter, errors } = collectingLimiter(new RedisStore({ client, timeout: 500 }), algorithm, prefix)
        const decision = await limiter.consume('c')
        expect(await keysWithoutTtl(admin, prefix)).toEqual([])
        // Sliding-log's first write is a PEXPIRE (the TTL before the ZADD), and Redis lets a script that
        // has written go on past maxmemory, so as not to break its atomicity: the call is counted, with a TTL.
        if (algorithm === 'sliding-log' && decision.source === 'store') return
        expect(decision.source).not.toBe('store')
        expect(errors).toEqual([
          expect.stringMatching(/the store failed \(Redis store call failed: OOM command not allowed when used memory > 'maxmemory'/),
        ])
        expect(await keysWithoutTtl(admin, prefix)).toEqual([])
      },
    )
  })

  describe('eviction policy', () => {
    it.each([
      ['allkeys-lru', true],
      ['volatile-lru', true],
      ['noeviction', false],
    ] as const)('warns once for maxmemory-policy %s when it can evict: %s', async (policy, warns) => {
      const redis = await startTestServer(server, { extraArgs: () => ['--maxmemory', '100mb', '--maxmemory-policy', policy] })
      const client = new Redis(redis.url)
      quiet.mockClear()
      try {
        new RedisStore({ client })
        new RedisStore({ client }) // a second store on the same client: still one warning
        await client.ping()
        await client.ping() // the CONFIG GETs were queued ahead of these
        const eviction = quiet.mock.calls.filter((call) => (call[1] as { code?: string } | undefined)?.code === 'TG_REDIS_EVICTION')
        expect(eviction.map((call) => String(call[0]))).toEqual(
          warns
            ? [
                expect.stringContaining(
                  `evicts keys when it reaches maxmemory (maxmemory-policy ${policy}): an evicted counter starts again`,
                ),
              ]
            : [],
        )
      } finally {
        await quitClient(client)
        await redis.stop()
      }
    })
  })
})

// The builds of newer Redis and Valkey in the matrix have no TLS: this stays on the default server.
describe('TLS with a certificate the client does not trust', () => {
  let server: TlsRedisServer
  let redis: RedisServer
  let tlsPort: number
  beforeAll(async () => {
    server = await startTlsRedisServer('127.0.0.1')
    ;({ redis, tlsPort } = server)
  })
  afterAll(async () => {
    await server?.stop()
  })

  it('names the certificate error, not only the deadline', async () => {
    // The client trusts the system CAs only: the server's self-signed certificate fails the handshake.
    const client = new Redis({ host: redis.host, port: tlsPort, tls: { servername: 'localhost' } })
    const print = jest.spyOn(console, 'error').mockImplementation(() => {}) // ioredis's own "Unhandled error event"
    try {
      const { limiter, errors } = collectingLimiter(new RedisStore({ client, timeout: 200 }), 'fixed-window', testPrefix('tls'))
      const decision = await limiter.consume('c')
      expect(decision.source).not.toBe('store')
      expect(errors).toEqual([
        expect.stringMatching(/did not answer within 200 ms; the connection is failing: TLS: self[- ]signed certificate/),
      ])
      // The app had no 'error' listener of its own: ioredis still printed the error, as it does without Tollgate.
      expect(print).toHaveBeenCalledWith('[ioredis] Unhandled error event:', expect.stringContaining('self'))
    } finally {
      print.mockRestore()
      client.disconnect()
    }
  })
})
