import { createHash } from 'node:crypto'
import { type AlgorithmName, Limiter, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { createClient, type RedisClientType } from 'redis'
import { createClient as createClient6 } from 'redis6'
import { ALGORITHM_NAMES } from '../../packages/core/src/algorithms'
import { refundBatchScript } from '../../packages/core/src/algorithms/correction-batch'
import { scriptsOf } from '../../packages/core/src/algorithms/scripts'
import { closeNodeRedis, newNodeRedisClient, quitClient, testPrefix } from '../harness/redis'
import { type RedisServer, startRedisServer } from '../harness/redis-server'
import { sleep } from '../support/time'

// What RedisStore learns about a node-redis client once it can talk to it (stores/redis/client-watch.ts), and the
// scripts node-redis has no defineCommand for (stores/redis/node-redis.ts): preloaded when the store is built,
// healed after a SCRIPT FLUSH, a refused command named and the eviction warning, and a client its app never
// connected. A server of this file's own: SCRIPT FLUSH, ACL users and CONFIG SET touch nobody else.

const sha = (lua: string) => createHash('sha1').update(lua).digest('hex')
const SHAS = ALGORITHM_NAMES.map(scriptsOf).flatMap((a) => [sha(a.admit), sha(refundBatchScript(a))])

let redis: RedisServer
let admin: Redis
const clients: RedisClientType[] = []
const unhandled: unknown[] = []
const onUnhandled = (reason: unknown) => void unhandled.push(reason)
let warnings: jest.SpyInstance

beforeAll(async () => {
  redis = await startRedisServer()
  admin = new Redis(redis.url, { disconnectTimeout: 0 })
  await admin.call('ACL', 'SETUSER', 'no-pexpire', 'on', '>pw', '~*', '+@all', '-pexpire')
})
afterAll(async () => {
  for (const c of clients) closeNodeRedis(c)
  await quitClient(admin)
  await redis?.stop()
})
beforeEach(() => {
  unhandled.length = 0
  process.on('unhandledRejection', onUnhandled)
  warnings = jest.spyOn(process, 'emitWarning').mockImplementation(() => {})
})
afterEach(() => {
  warnings.mockRestore()
  process.off('unhandledRejection', onUnhandled)
  expect(unhandled).toEqual([])
})

async function nodeRedis(url = redis.url): Promise<RedisClientType> {
  const client = await newNodeRedisClient(url)
  clients.push(client)
  return client
}

/** Polls `check` every 10 ms, at most 50 times, until it holds. */
async function eventually(check: () => Promise<boolean> | boolean): Promise<boolean> {
  for (let i = 0; i < 50; i++) {
    if (await check()) return true
    await sleep(10)
  }
  return false
}

const loaded = async () => (await admin.script('EXISTS', ...SHAS)) as number[]

it("preloads the store's scripts when it is built on a connected client", async () => {
  await admin.script('FLUSH')
  expect(await loaded()).toEqual(SHAS.map(() => 0))
  new RedisStore({ client: await nodeRedis() })
  expect(await eventually(async () => (await loaded()).every((n) => n === 1))).toBe(true)
})

it.each<AlgorithmName>(['sliding-window', 'gcra', 'sliding-log'])(
  '%s: decides from Redis after a SCRIPT FLUSH (NOSCRIPT, then EVAL), and the script is cached again',
  async (algorithm) => {
    const limiter = new Limiter({
      store: new RedisStore({ client: await nodeRedis(), timeout: '2s' }),
      algorithm,
      max: 2,
      window: '1m',
      prefix: testPrefix(`noscript-${algorithm}`),
    })
    await limiter.consume('warm') // the preload is done with
    await admin.script('FLUSH')
    const decisions = [await limiter.consume('c'), await limiter.consume('c'), await limiter.consume('c')]
    expect(decisions.map((d) => [d.source, d.allowed])).toEqual([
      ['store', true],
      ['store', true],
      ['store', false],
    ])
    expect(((await admin.script('EXISTS', sha(scriptsOf(algorithm).admit))) as number[])[0]).toBe(1)
  },
)

it('warns once, at the first refusal, about a command the Redis user may not run, and names it in the failure', async () => {
  const client = createClient({ url: `redis://no-pexpire:pw@${redis.host}:${redis.port}` }) as RedisClientType
  client.on('error', () => {})
  await client.connect()
  clients.push(client)
  const errors: string[] = []
  const limiter = new Limiter({
    store: new RedisStore({ client, timeout: '2s' }),
    max: 3,
    window: '1m',
    prefix: testPrefix('node-redis-acl'),
    logger: { warn: () => {}, error: (message: string) => void errors.push(message) },
  })
  await client.get('warm') // the store's commands at connect were sent ahead of this: none checks permissions
  expect(warnings.mock.calls).toEqual([])
  const decision = await limiter.consume('c') // the fast path: MULTI, INCRBY, PEXPIRE refused
  await limiter.consume('c')
  expect(decision.source).toBe('fallback')
  expect(warnings.mock.calls.map((call) => String(call[0]))).toEqual([
    expect.stringMatching(
      /NOPERM: the Redis user "no-pexpire" cannot run PEXPIRE \(used by fixed-window, sliding-window, gcra, sliding-log, concurrency\)/,
    ),
  ])
  expect(errors.join('\n')).toMatch(/NOPERM.*(cannot run PEXPIRE|'pexpire' command)/)
})

it.each([
  ['node-redis 5', (url: string) => nodeRedis(url)],
  [
    'node-redis 6, whose replies are RESP3 (CONFIG GET a map)',
    async (url: string) => {
      const client = createClient6({ url, socket: { connectTimeout: 2000 } })
      client.on('error', () => {})
      await client.connect()
      clients.push(client as unknown as RedisClientType)
      return client as unknown as RedisClientType
    },
  ],
] as const)('warns about an evicting maxmemory-policy through %s', async (_name, connect) => {
  const fresh = await startRedisServer()
  const config = new Redis(fresh.url, { disconnectTimeout: 0 })
  try {
    await config.config('SET', 'maxmemory', '100mb')
    await config.config('SET', 'maxmemory-policy', 'allkeys-lru')
    new RedisStore({ client: await connect(fresh.url) })
    expect(await eventually(() => warnings.mock.calls.length > 0)).toBe(true)
    expect(warnings.mock.calls.map((call) => (call[1] as { code?: string }).code)).toEqual(['TG_REDIS_EVICTION'])
  } finally {
    await quitClient(config)
    await fresh.stop()
  }
})

it('answers from the fallback at once for a client its app never connected, saying so', async () => {
  const client = createClient({ url: redis.url })
  const errors: string[] = []
  const limiter = new Limiter({
    store: new RedisStore({ client, timeout: '2s' }),
    max: 3,
    window: '1m',
    prefix: testPrefix('node-redis-closed'),
    logger: { warn: () => {}, error: (message: string) => void errors.push(message) },
  })
  const started = Date.now()
  const decision = await limiter.consume('c')
  // Well inside the 2 s deadline: node-redis refuses a command on a closed client at once.
  expect(Date.now() - started).toBeLessThan(1000)
  expect(decision.source).toBe('fallback')
  expect(errors.join('\n')).toMatch(/The client is closed/)
  expect(client.isOpen).toBe(false)
})
