import { createHash } from 'node:crypto'
import { type AlgorithmName, type Decision, Limiter, type LimiterOptions, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { ALGORITHM_NAMES } from '../../packages/core/src/algorithms'
import { refundBatchScript } from '../../packages/core/src/algorithms/correction-batch'
import { scriptsOf } from '../../packages/core/src/algorithms/scripts'
import { keysWithoutTtl, quitClient, testPrefix } from '../harness/redis'
import type { RedisServer } from '../harness/redis-server'
import { startTestServer, testServers } from '../harness/servers'
import { sleep } from '../support/time'

// A Redis user that may not run one of the store's commands. Whatever is refused, no key is
// left without a TTL, and the cause is named: the log says which command the user lacks, not only
// "EXECABORT" or "can't run this command". Each ACL user here lacks one command.

const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log', 'concurrency']
const USERS = ['pexpire', 'set', 'incrby', 'zadd', 'get', 'hmget', 'hset'] as const
const limitsFor: Record<'single' | 'several', Pick<LimiterOptions, 'max' | 'window' | 'limits'>> = {
  single: { max: 3, window: '1m' },
  several: {
    limits: [
      { max: 3, window: '1m' },
      { max: 50, window: '1h' },
    ],
  },
}

let redis: RedisServer
// Each client warns once about its user's missing commands; the warnings are asserted below, not printed.
let quiet: jest.SpyInstance
let admin: Redis
const clients: Redis[] = []

describe.each(testServers())('on $name', (server) => {
  beforeAll(async () => {
    quiet = jest.spyOn(process, 'emitWarning').mockImplementation(() => {})
    redis = await startTestServer(server)
    admin = new Redis(redis.url)
    for (const command of USERS) await admin.call('ACL', 'SETUSER', `no-${command}`, 'on', '>pw', '~*', '+@all', `-${command}`)
  })

  afterAll(async () => {
    quiet.mockRestore()
    for (const c of clients.splice(0)) await quitClient(c)
    await quitClient(admin)
    await redis?.stop()
  })

  function userClient(command: string, options: Record<string, unknown> = {}): Redis {
    const c = new Redis({ host: redis.host, port: redis.port, username: `no-${command}`, password: 'pw', ...options })
    clients.push(c)
    return c
  }

  interface Run {
    decisions: Decision[]
    errors: string[]
  }

  /** 8 decisions for 2 clients through a limiter whose store's user lacks `command`. */
  async function run(command: string, algorithm: AlgorithmName, shape: keyof typeof limitsFor, prefix: string): Promise<Run> {
    const store = new RedisStore({ client: userClient(command), timeout: 500 })
    const errors: string[] = []
    const logger = { warn: () => {}, error: (message: string) => void errors.push(message) }
    const limiter = new Limiter({ store, algorithm, prefix, logger, ...limitsFor[shape] })
    const storeErrors: string[] = []
    limiter.on('storeError', (error: Error) => void storeErrors.push(error.message))
    const decisions: Decision[] = []
    for (let i = 0; i < 8; i++) decisions.push(await limiter.consume(`client-${i % 2}`))
    return { decisions, errors: [...errors, ...storeErrors] }
  }

  describe.each(ALGORITHMS)('%s with a Redis user that lacks one command', (algorithm) => {
    it.each(USERS.flatMap((command) => (['single', 'several'] as const).map((shape) => [command, shape] as const)))(
      'leaves no key without a TTL when the user may not run %s (%s limits)',
      async (command, shape) => {
        const prefix = testPrefix(`acl-${command}`)
        await run(command, algorithm, shape, prefix)
        expect(await keysWithoutTtl(admin, prefix)).toEqual([])
      },
    )

    it('names the refused command in the log', async () => {
      // Which command each algorithm needs (the fast path only for a single fixed-window limit).
      const needs: Record<AlgorithmName, string[]> = {
        'fixed-window': ['incrby', 'hmget', 'hset', 'pexpire'],
        'sliding-window': ['hmget', 'hset', 'pexpire'],
        gcra: ['hmget', 'hset', 'pexpire'],
        'sliding-log': ['pexpire', 'zadd'],
        concurrency: ['pexpire', 'zadd'],
      }
      for (const command of needs[algorithm]) {
        for (const shape of ['single', 'several'] as const) {
          // The fast path (a single fixed-window limit) sends INCRBY and PEXPIRE; the script path HMGET, HSET and PEXPIRE.
          if (algorithm === 'fixed-window' && (shape === 'single' ? command === 'hmget' || command === 'hset' : command === 'incrby'))
            continue
          const { decisions, errors } = await run(command, algorithm, shape, testPrefix('acl-named'))
          expect(decisions.every((d) => d.source !== 'store')).toBe(true)
          expect(errors.join('\n')).toMatch(new RegExp(`NOPERM.*(cannot run ${command.toUpperCase()}|'${command}' command)`))
        }
      }
    })
  })

  it('counts nothing in Redis for a user without PEXPIRE, on every algorithm: no key may be made without its TTL', async () => {
    for (const algorithm of ALGORITHMS) {
      for (const shape of ['single', 'several'] as const) {
        const prefix = testPrefix('acl-no-ttl')
        const { decisions } = await run('pexpire', algorithm, shape, prefix)
        const fromStore = decisions.filter((d) => d.source === 'store').length
        expect([algorithm, shape, fromStore, await admin.keys(`${prefix}*`)]).toEqual([algorithm, shape, 0, []])
      }
    }
  })

  it('sends no permission check when built, and warns once, naming the missing command, at the first refusal', async () => {
    quiet.mockRestore()
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => {})
    try {
      const c = userClient('pexpire')
      const store = new RedisStore({ client: c, timeout: '2s' })
      await c.ping()
      expect(warn.mock.calls).toEqual([])
      const logger = { warn: () => {}, error: () => {} }
      const limiter = new Limiter({ store, algorithm: 'sliding-log', prefix: testPrefix('acl-warn'), max: 3, window: '1m', logger })
      limiter.on('storeError', () => {})
      for (let i = 0; i < 3; i++) await limiter.consume('c')
      expect(warn.mock.calls.map((call) => String(call[0]))).toEqual([
        expect.stringMatching(
          /NOPERM: the Redis user "no-pexpire" cannot run PEXPIRE \(used by fixed-window, sliding-window, gcra, sliding-log, concurrency\); allow it with ACL SETUSER no-pexpire \+pexpire/,
        ),
      ])
    } finally {
      warn.mockRestore()
      quiet = jest.spyOn(process, 'emitWarning').mockImplementation(() => {})
    }
  })

  describe('cold start', () => {
    const sha = (lua: string) => createHash('sha1').update(lua).digest('hex')

    it("loads the store's scripts once the client is ready, before its first decision", async () => {
      const fresh = await startTestServer(server)
      const c = new Redis(fresh.url)
      const probe = new Redis(fresh.url)
      try {
        const shas = ALGORITHM_NAMES.map(scriptsOf).flatMap((a) => [sha(a.admit), sha(refundBatchScript(a))])
        expect(await probe.script('EXISTS', ...shas)).toEqual(shas.map(() => 0))
        new RedisStore({ client: c })
        await c.ping() // the store's SCRIPT LOADs were queued ahead of this
        expect(await probe.script('EXISTS', ...shas)).toEqual(shas.map(() => 1))
      } finally {
        await quitClient(c)
        await quitClient(probe)
        await fresh.stop()
      }
    })

    it('sends nothing for a lazyConnect client until it connects, then loads the scripts', async () => {
      const fresh = await startTestServer(server)
      const c = new Redis(fresh.url, { lazyConnect: true })
      const probe = new Redis(fresh.url)
      try {
        new RedisStore({ client: c })
        await sleep(50)
        expect(c.status).toBe('wait')
        await c.connect()
        let loaded = 0
        for (let i = 0; i < 50 && loaded === 0; i++) {
          await sleep(10)
          loaded = ((await probe.script('EXISTS', sha(scriptsOf('gcra').admit))) as number[])[0]!
        }
        expect(loaded).toBe(1)
      } finally {
        await quitClient(c)
        await quitClient(probe)
        await fresh.stop()
      }
    })
  })
})
