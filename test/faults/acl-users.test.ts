import { randomUUID } from 'node:crypto'
import { type AlgorithmName, type Decision, Limiter, type LimiterOptions, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { createClient, type RedisClientType } from 'redis'
import { ALGORITHM_NAMES } from '../../packages/core/src/algorithms'
import { scriptsOf } from '../../packages/core/src/algorithms/scripts'
import { CHECK_FORMS, commandsOf, diagnosisChecks } from '../../packages/core/src/stores/redis/permissions'
import { closeNodeRedis, keysWithoutTtl, quitClient } from '../harness/redis'
import type { RedisServer } from '../harness/redis-server'
import { startTestServer, testServers } from '../harness/servers'

// The Redis users apps really run with: restricted to the app's keys (`~tg:*`), with every command or
// only the README's least-privilege list. Nothing the store sends may crash or wedge the server, on
// any server of the matrix: once `redis.acl_check_cmd('EVAL')` with no arguments, sent at connect to
// check permissions, killed Redis 7.0 and later, and Valkey, for any user with a key pattern. The
// same run shows a user lacking one command named in the log, without a crash.

const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log', 'concurrency']
/** README.md, "Redis", and docs/guides/redis.md, "A least-privilege user". */
const LEAST_PRIVILEGE = [
  ...['get', 'set', 'incrby', 'pexpire', 'decrby', 'del', 'exists', 'type', 'multi', 'exec', 'eval', 'evalsha'],
  ...['hget', 'hmget', 'hset', 'hincrby'],
]
const SLIDING_LOG = ['zadd', 'zrem', 'zscore', 'zcount', 'zrange', 'zremrangebyscore']
const USERS = [
  { name: 'app-all', rules: ['~tg:*', '+@all'] },
  { name: 'app-least', rules: ['~tg:*', ...[...LEAST_PRIVILEGE, ...SLIDING_LOG].map((c) => `+${c}`)] },
]
const SHAPES: Record<'single' | 'several', Pick<LimiterOptions, 'max' | 'window' | 'limits'>> = {
  single: { max: 2, window: '1m' },
  several: {
    limits: [
      { max: 2, window: '1m' },
      { max: 50, window: '1h' },
    ],
  },
}

/** An app's connection as `user`: what the store borrows, and how the app closes it. */
interface App {
  client: ConstructorParameters<typeof RedisStore>[0]['client']
  /** A round trip the least-privilege user may make (not PING): a GET of a key under its pattern. */
  ping(): Promise<unknown>
  close(): Promise<void>
}

const CLIENTS: Array<[string, (server: RedisServer, user: string) => Promise<App>]> = [
  [
    'ioredis',
    async (server, user) => {
      const client = new Redis({ host: server.host, port: server.port, username: user, password: 'pw', disconnectTimeout: 0 })
      client.on('error', () => {})
      return { client, ping: () => client.get('tg:ping'), close: () => quitClient(client) }
    },
  ],
  [
    'node-redis',
    async (server, user) => {
      const client = createClient({ url: `redis://${user}:pw@${server.host}:${server.port}` }) as RedisClientType
      client.on('error', () => {})
      await client.connect()
      return { client, ping: () => client.get('tg:ping'), close: async () => closeNodeRedis(client) }
    },
  ],
]

it('asks acl_check_cmd about every command a script calls with a whole argument list, never a bare name', () => {
  const called = new Set(
    ALGORITHM_NAMES.map(scriptsOf).flatMap((a) => [...commandsOf(a.admit), ...commandsOf(a.refund), ...commandsOf(a.settle)]),
  )
  expect([...called].filter((c) => CHECK_FORMS[c] === undefined)).toEqual([])
  const checks = diagnosisChecks([...called], ['tg:{c}:1'])
  expect(checks.filter((c) => c.length < 2 || c[1] !== 'tg:{c}:1')).toEqual([])
  expect(checks.length).toBe(called.size)
})

/** `promise`, or a rejection after 2 s: a client of a server that died waits to reconnect for ever. */
function within<T>(promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('no reply within 2 s')), 2000)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

describe.each(testServers())('on $name', (matrixServer) => {
  let server: RedisServer
  let admin: Redis
  let pid: number
  let warnings: jest.SpyInstance
  let consoleWarn: jest.SpyInstance

  beforeAll(async () => {
    server = await startTestServer(matrixServer)
    pid = server.pid
    admin = new Redis(server.url, { disconnectTimeout: 0, maxRetriesPerRequest: 1 })
    for (const user of USERS) await admin.call('ACL', 'SETUSER', user.name, 'on', '>pw', ...user.rules)
    await admin.call('ACL', 'SETUSER', 'no-zadd', 'on', '>pw', '~tg:*', '+@all', '-zadd')
    await admin.call('ACL', 'SETUSER', 'other-keys', 'on', '>pw', '~other:*', '+@all')
  })
  afterAll(async () => {
    await quitClient(admin)
    await server?.stop()
  })
  beforeEach(() => {
    expect({ running: server.running, pid: server.pid }).toEqual({ running: true, pid })
    warnings = jest.spyOn(process, 'emitWarning').mockImplementation(() => {})
    // ioredis's own notice that its ready check (INFO) is refused to the least-privilege user.
    consoleWarn = jest.spyOn(console, 'warn').mockImplementation(() => {})
  })
  afterEach(() => {
    warnings.mockRestore()
    consoleWarn.mockRestore()
  })

  /** The server that started this file's tests still runs and answers (a dead one fails the test at once, not at its timeout). */
  async function expectAlive(): Promise<void> {
    expect({ running: server.running, pid: server.pid }).toEqual({ running: true, pid })
    expect(await within(admin.ping())).toBe('PONG')
  }

  function limiterOf(app: App, algorithm: AlgorithmName, shape: keyof typeof SHAPES, prefix: string, errors: string[]): Limiter {
    const logger = { warn: () => {}, error: (message: string) => void errors.push(message) }
    const limiter = new Limiter({
      store: new RedisStore({ client: app.client, timeout: '2s' }),
      algorithm,
      prefix,
      logger,
      ...SHAPES[shape],
    })
    limiter.on('storeError', (error: Error) => void errors.push(error.message))
    return limiter
  }

  const brief = (d: Decision) => [d.allowed, d.source]

  describe.each(CLIENTS)('through %s', (_clientName, connect) => {
    describe.each(USERS)('as the Redis user $name', (user) => {
      it('survives construction, every algorithm, peek, reset and a restart of the app', async () => {
        let app = await connect(server, user.name)
        try {
          new RedisStore({ client: app.client })
          await within(app.ping()) // the store's commands at connect were sent ahead of this
          await expectAlive()
          for (const algorithm of ALGORITHMS) {
            for (const shape of ['single', 'several'] as const) {
              const prefix = `tg:${randomUUID()}:`
              const errors: string[] = []
              const limiter = limiterOf(app, algorithm, shape, prefix, errors)
              const run = [await limiter.consume('c'), await limiter.consume('c'), await limiter.consume('c')]
              const peeked = await limiter.peek('c')
              await limiter.reset('c')
              const afterReset = await limiter.consume('c')
              // A restart of the app: a new client and store on the same server and keys.
              await app.close()
              app = await connect(server, user.name)
              const restarted = limiterOf(app, algorithm, shape, prefix, errors)
              const afterRestart = [await restarted.consume('c'), await restarted.consume('c')]
              expect({ algorithm, shape, errors }).toEqual({ algorithm, shape, errors: [] })
              expect([...run, peeked, afterReset, ...afterRestart].map(brief)).toEqual([
                [true, 'store'],
                [true, 'store'],
                [false, 'store'],
                [false, 'store'],
                [true, 'store'],
                [true, 'store'],
                [false, 'store'],
              ])
              expect(await keysWithoutTtl(admin, prefix)).toEqual([])
            }
          }
          expect(warnings.mock.calls).toEqual([])
          await expectAlive()
        } finally {
          await app.close()
        }
      })

      it('settles decisions down and up, on every algorithm and shape, keys keeping their TTLs', async () => {
        const app = await connect(server, user.name)
        try {
          // A concurrency slot is held or free: it has no count to settle (its settle moves nothing).
          for (const algorithm of ALGORITHMS.filter((a) => a !== 'concurrency')) {
            for (const shape of ['single', 'several'] as const) {
              const prefix = `tg:${randomUUID()}:`
              const errors: string[] = []
              const limiter = limiterOf(app, algorithm, shape, prefix, errors)
              await limiter.settle(await limiter.consume('c', 2), 0) // both units back
              await limiter.settle(await limiter.consume('d', 1), 5) // charged past the limit of 2
              const left = [(await limiter.peek('c')).remaining, (await limiter.peek('d')).remaining]
              expect({ algorithm, shape, errors, left }).toEqual({ algorithm, shape, errors: [], left: [2, 0] })
              expect(await keysWithoutTtl(admin, prefix)).toEqual([])
            }
          }
          await expectAlive()
        } finally {
          await app.close()
        }
      })

      it.each(ALGORITHMS)('%s: admits exactly 50 of 500 concurrent requests at max 50, all from the store', async (algorithm) => {
        const app = await connect(server, user.name)
        try {
          const prefix = `tg:${randomUUID()}:`
          const errors: string[] = []
          const limiter = limiterOf(app, algorithm, 'single', prefix, errors)
          const decisions = await Promise.all(Array.from({ length: 500 }, () => limiter.consume('hot', 1, 50)))
          const allowed = decisions.filter((d) => d.allowed)
          expect({ allowed: allowed.length, fromStore: allowed.filter((d) => d.source === 'store').length, errors }).toEqual({
            allowed: 50,
            fromStore: 50,
            errors: [],
          })
          expect(await keysWithoutTtl(admin, prefix)).toEqual([])
          await expectAlive()
        } finally {
          await app.close()
        }
      })
    })

    it('names a command a key-restricted user lacks, in the warning and the log, and the server lives', async () => {
      const app = await connect(server, 'no-zadd')
      try {
        const errors: string[] = []
        const limiter = limiterOf(app, 'sliding-log', 'single', `tg:${randomUUID()}:`, errors)
        const decision = await limiter.consume('c')
        expect(decision.source).not.toBe('store')
        expect(errors.join('\n')).toMatch(
          /NOPERM: the Redis user "no-zadd" cannot run ZADD \(used by sliding-log, concurrency\); allow it with ACL SETUSER no-zadd \+zadd/,
        )
        const noperm = warnings.mock.calls.filter((call) => (call[1] as { code?: string } | undefined)?.code === 'TG_REDIS_NOPERM')
        expect(noperm.map((call) => String(call[0]))).toEqual([expect.stringContaining('cannot run ZADD')])
        await expectAlive()
      } finally {
        await app.close()
      }
    })

    it("names a key pattern that does not cover the limiter's keys", async () => {
      const app = await connect(server, 'other-keys')
      try {
        const errors: string[] = []
        const prefix = `tg:${randomUUID()}:`
        const limiter = limiterOf(app, 'gcra', 'single', prefix, errors)
        expect((await limiter.consume('c')).source).not.toBe('store')
        expect(errors.join('\n')).toContain(`the Redis user "other-keys" cannot access key ${prefix}{c}`)
        expect(errors.join('\n')).toContain('its key pattern must cover the prefix')
        await expectAlive()
      } finally {
        await app.close()
      }
    })
  })
})
