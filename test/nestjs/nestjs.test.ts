import { join } from 'node:path'
import type { DynamicModule, ExecutionContext, INestApplication } from '@nestjs/common'
import { type Logger, MemoryStore, RedisStore, type Store, TollgateError } from '@tollgate/core'
import { rateLimit as expressRateLimit } from '@tollgate/express'
import { RateLimit, SkipRateLimit, TollgateGuard, TollgateLimits, TollgateModule, type TollgateModuleOptions } from '@tollgate/nestjs'
import type { Redis } from 'ioredis'
import { escapeGlob, keysWithoutTtl, scanKeys, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { get } from '../support/http'
import { compileFixtures } from './compile'

// Nest apps built with tsc and experimentalDecorators (test/nestjs/fixtures),
// on platform-express and platform-fastify, over real HTTP, on the memory store and on Redis.

type Platform = 'express' | 'fastify'
type Started = { app: INestApplication; url: string }
/** What test/nestjs/fixtures/stacked.ts exports (compiled by tsc at run time, so not imported for its types). */
interface Stacked {
  stackedModule(tollgate: DynamicModule): DynamicModule
  badModule(tollgate: DynamicModule): DynamicModule
  start(platform: Platform, root: DynamicModule): Promise<Started>
}

let fixtures: ReturnType<typeof compileFixtures>
let stacked: Stacked
const db = useRedis()
beforeAll(async () => {
  fixtures = compileFixtures()
  stacked = require(join(fixtures.dir, 'stacked.js')) as Stacked
}, 120_000)
afterAll(() => {
  fixtures?.remove()
})

const apps: INestApplication[] = []
afterEach(async () => {
  await Promise.allSettled(apps.splice(0).map((app) => app.close()))
})

const REDIS = 'REDIS_CLIENT'

/** TollgateModule as the test wants it: forRoot with a store instance, or forRootAsync with the Redis client injected. */
function tollgate(store: 'memory' | 'Redis', options: TollgateModuleOptions): DynamicModule {
  if (store === 'memory') return TollgateModule.forRoot({ ...options, store: new MemoryStore() })
  const holder: DynamicModule = { module: class RedisHolder {}, providers: [{ provide: REDIS, useValue: db.client }], exports: [REDIS] }
  return TollgateModule.forRootAsync({
    imports: [holder],
    inject: [REDIS],
    useFactory: async (redis: Redis) => ({ ...options, store: new RedisStore({ client: redis, timeout: '2s' }) }),
  })
}

describe.each<[Platform, 'memory' | 'Redis']>([
  ['express', 'memory'],
  ['fastify', 'memory'],
  ['express', 'Redis'],
  ['fastify', 'Redis'],
])('a Nest app on platform-%s, %s store', (platform, store) => {
  // 250 ms into a minute, so the seconds left are the same in every run.
  let now = 0
  let prefix = ''
  let logs: string[] = []
  const logger: Logger = { warn: (m) => void logs.push(m), error: (m) => void logs.push(m) }

  async function start(): Promise<string> {
    now = Math.floor(Date.now() / 60_000) * 60_000 + 60_250
    prefix = testPrefix(`nestjs-${platform}`)
    logs = []
    const root = stacked.stackedModule(tollgate(store, { max: 10, window: '1m', prefix, clock: () => now, logger }))
    const { app, url } = await stacked.start(platform, root)
    apps.push(app)
    return url
  }
  const json = (body: string) => JSON.parse(body) as { decisions: string[] }

  it('stacks the method limit on the class limit on the module limit: each counts once and shows in the headers', async () => {
    const url = await start()
    const replies = [await get(`${url}/cats`), await get(`${url}/cats`), await get(`${url}/cats`)]
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429])
    const [first, second, refused] = replies as [(typeof replies)[0], (typeof replies)[0], (typeof replies)[0]]
    expect(first.headers['ratelimit-policy']).toBe('"10-per-1m";q=10;w=60, "5-per-1m";q=5;w=60, "2-per-1s";q=2;w=1')
    expect(first.headers.ratelimit).toBe('"10-per-1m";r=9;t=60, "5-per-1m";r=4;t=60, "2-per-1s";r=1;t=1')
    expect(json(first.body).decisions).toEqual(['10-per-1m:9', '5-per-1m:4', '2-per-1s:1'])
    expect(json(second.body).decisions).toEqual(['10-per-1m:8', '5-per-1m:3', '2-per-1s:0'])
    expect(refused.headers.ratelimit).toBe('"10-per-1m";r=7;t=60, "5-per-1m";r=2;t=60, "2-per-1s";r=0;t=1')
    expect(refused.headers['retry-after']).toBe('1')
    expect(refused.headers['cache-control']).toBe('no-store')
    expect(refused.headers['content-type']).toBe('application/problem+json')
    expect(JSON.parse(refused.body)).toEqual({
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
      detail: 'Too many requests: the limit is 2 per 1 second. Retry after the number of seconds in the Retry-After header.',
    })

    // The class limit alone on another method: the three requests above counted once each in it.
    const classOnly = await get(`${url}/cats/class`)
    expect(classOnly.status).toBe(200)
    expect(json(classOnly.body).decisions).toEqual(['10-per-1m:6', '5-per-1m:1'])
    expect(JSON.parse(classOnly.body) as { own: boolean; shared: boolean }).toMatchObject({ own: platform === 'fastify', shared: false })
    expect((await get(`${url}/cats/class`)).status).toBe(200)
    const overClass = await get(`${url}/cats/class`)
    expect(overClass.status).toBe(429)
    expect(overClass.headers.ratelimit).toBe('"10-per-1m";r=4;t=60, "5-per-1m";r=0;t=60')
    expect(overClass.headers['retry-after']).toBe('60')
    if (store === 'Redis') expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })

  it('sends the refusal byte for byte as @tollgate/express does', async () => {
    const url = await start()
    for (let i = 0; i < 2; i++) await get(`${url}/cats`)
    const nest = await get(`${url}/cats`)
    const express = (await import('express')).default()
    express.use(expressRateLimit({ max: 2, clock: () => now, store: new MemoryStore() }))
    express.get('/', (_req, res) => void res.send('ok'))
    const server = express.listen(0, '127.0.0.1')
    try {
      await new Promise((resolve) => server.once('listening', resolve))
      const base = `http://127.0.0.1:${(server.address() as import('node:net').AddressInfo).port}`
      for (let i = 0; i < 2; i++) await get(base)
      const plain = await get(base)
      expect(nest.status).toBe(plain.status)
      expect(nest.body).toBe(plain.body)
      for (const name of ['content-type', 'retry-after', 'cache-control', 'content-length'])
        expect([name, nest.headers[name]]).toEqual([name, plain.headers[name]])
    } finally {
      server.close()
    }
  })

  it('leaves the @SkipRateLimit() method unlimited, uncounted and without headers', async () => {
    const url = await start()
    for (let i = 0; i < 15; i++) {
      const r = await get(`${url}/cats/open`)
      expect([r.status, r.headers.ratelimit, r.body]).toEqual([200, undefined, '{"decision":null}'])
    }
    // Nothing was counted in the module's limit meanwhile.
    expect(json((await get(`${url}/dogs`)).body).decisions).toEqual(['10-per-1m:9'])
  })

  it('skips only the named layers with @SkipRateLimit("module", "class")', async () => {
    const url = await start()
    const own = await get(`${url}/cats/own`)
    expect(json(own.body).decisions).toEqual(['1-per-1m:0'])
    expect(own.headers['ratelimit-policy']).toBe('"1-per-1m";q=1;w=60')
    expect((await get(`${url}/cats/own`)).status).toBe(429)
    expect(json((await get(`${url}/dogs`)).body).decisions).toEqual(['10-per-1m:9'])
  })

  it('counts a request once when the guard is bound globally and again with @UseGuards', async () => {
    const url = await start()
    const first = await get(`${url}/dogs`)
    expect(first.headers.ratelimit).toBe('"10-per-1m";r=9;t=60')
    expect(json(first.body).decisions).toEqual(['10-per-1m:9'])
    expect(json((await get(`${url}/dogs`)).body).decisions).toEqual(['10-per-1m:8'])
  })

  it("lets the app's exception filter answer the refusal, with the RateLimit headers already set", async () => {
    const url = await start()
    expect((await get(`${url}/filtered`)).status).toBe(200)
    const refused = await get(`${url}/filtered`)
    expect(refused.status).toBe(429)
    expect(JSON.parse(refused.body)).toEqual({ error: 'slow down', status: 429, retryAfterMs: 59_750 })
    expect(refused.headers.ratelimit).toBe('"10-per-1m";r=8;t=60, "1-per-1m";r=0;t=60')
    expect(refused.headers['retry-after']).toBe('60')
  })
})

describe('options are validated as in the other adapters', () => {
  const messageOf = (build: () => unknown): string => {
    try {
      build()
    } catch (error) {
      expect(error).toBeInstanceOf(TollgateError)
      return (error as Error).message
    }
    throw new Error('accepted')
  }

  it.each<[string, Record<string, unknown>]>([
    ['max', { max: -1 }],
    ['window', { window: 'soon' }],
    ['an unknown option', { windowMS: 1000 }],
    ['store', { store: {} as Store }],
  ])('TollgateModule.forRoot rejects a bad %s with the message rateLimit() gives', (_what, options) => {
    // The list of known options ends with each adapter's own (handler, globalGuard).
    const withoutAdapterKeys = (m: string) => m.replace(/, (handler|globalGuard) \[/, ' [')
    expect(withoutAdapterKeys(messageOf(() => TollgateModule.forRoot(options)))).toBe(
      withoutAdapterKeys(messageOf(() => expressRateLimit(options))),
    )
  })

  it('rejects a globalGuard that is not a boolean, naming it and the value', () => {
    expect(messageOf(() => TollgateModule.forRoot({ globalGuard: 'yes' as never }))).toBe(
      'Invalid option "globalGuard": expected true or false, got "yes" (string) [TG_INVALID_OPTION]',
    )
  })

  it('rejects an unknown @SkipRateLimit layer', () => {
    expect(messageOf(() => SkipRateLimit('everything' as never))).toContain('Invalid option "SkipRateLimit"')
  })

  it.each<Platform>(['express', 'fastify'])(
    'fails the start of a platform-%s app whose @RateLimit options are invalid, naming the method',
    async (platform) => {
      const attempt = stacked.start(platform, stacked.badModule(TollgateModule.forRoot({ store: new MemoryStore() })))
      await expect(attempt).rejects.toThrow('@RateLimit on BadController.get: Invalid option "max": expected')
    },
  )

  it('fails the start of an app whose forRootAsync factory returns invalid options', async () => {
    const module = TollgateModule.forRootAsync({ useFactory: () => ({ max: 'many' as never }) })
    await expect(stacked.start('express', stacked.badModule(module))).rejects.toThrow('Invalid option "max"')
  })

  it('throws a TollgateError for a decorated handler reached where there is no HTTP request (GraphQL without the hook)', () => {
    class Resolver {
      cats() {}
    }
    RateLimit({ max: 1 })(Resolver.prototype, 'cats', Object.getOwnPropertyDescriptor(Resolver.prototype, 'cats'))
    const guard = new TollgateGuard(new TollgateLimits({ store: new MemoryStore() }))
    const context = {
      getType: () => 'graphql',
      getClass: () => Resolver,
      getHandler: () => Resolver.prototype.cats,
    } as unknown as ExecutionContext
    expect(() => guard.canActivate(context)).toThrow(/Resolver\.cats found no HTTP request in a "graphql" context: extend TollgateGuard/)
    // The module's limit alone is for HTTP: such a context passes.
    const plain = { ...context, getHandler: () => function other() {} } as unknown as ExecutionContext
    expect(guard.canActivate(plain)).toBe(true)
  })
})

// The decorator table: @RateLimit from @tollgate/express on a Nest controller (built by tsc with
// experimentalDecorators) type-checks, limits in either order with @Get, and fails loudly without req/res.
describe('@tollgate/express RateLimit on a Nest controller', () => {
  interface ExpressDecorated {
    startExpressDecorated(errors: unknown[]): Promise<Started>
  }
  const statuses = async (url: string, n: number) => {
    const seen: number[] = []
    for (let i = 0; i < n; i++) seen.push((await get(url)).status)
    return seen
  }

  it('limits above and below @Get, writes nothing more after a 429, and names a method without its request', async () => {
    const fixture = require(join(fixtures.dir, 'express-decorator.js')) as ExpressDecorated
    const errors: unknown[] = []
    const { app, url } = await fixture.startExpressDecorated(errors)
    apps.push(app)

    expect(await statuses(`${url}/x/above`, 4)).toEqual([200, 200, 429, 429])
    const refused = await get(`${url}/x/below`)
      .then(() => get(`${url}/x/below`))
      .then(() => get(`${url}/x/below`))
    expect(refused.status).toBe(429)
    expect(refused.headers['retry-after']).toBeDefined()
    expect(refused.headers.ratelimit).toMatch(/r=0/)

    const blind = await get(`${url}/x/blind`)
    expect(blind.status).toBe(500)
    const logged = JSON.stringify(
      errors.map((e) => String((e as unknown[])[0] instanceof Error ? ((e as unknown[])[0] as Error).message : e)),
    )
    expect(logged).toContain('ExpressDecorated.blind')
    // Nothing else went wrong: no second write after a refusal (ERR_HTTP_HEADERS_SENT).
    expect(logged).not.toContain('ERR_HTTP_HEADERS_SENT')
    expect(logged).not.toContain('Cannot set headers')
  })
})

/** Waits until at least `ms` are left in the current window of `windowMs`, so a test's requests share one window. */
async function earlyInWindow(windowMs: number, ms: number): Promise<void> {
  const left = windowMs - (Date.now() % windowMs)
  if (left < ms) await new Promise((r) => setTimeout(r, left + 5))
}

describe.each<Platform>(['express', 'fastify'])('lease on platform-%s', (platform) => {
  it('app.close() gives back the units the module limit leased and did not spend', async () => {
    const prefix = testPrefix(`nestjs-lease-${platform}`)
    const { app, url } = await stacked.start(
      platform,
      stacked.stackedModule(tollgate('Redis', { max: 1000, window: '1m', prefix, lease: true })),
    )
    apps.push(app)
    await earlyInWindow(60_000, 20_000)
    // Real time, so the process sees a rate and asks for more than one unit at a time.
    for (let i = 0; i < 40; i++) expect((await get(`${url}/dogs`)).status).toBe(200)
    const [key] = (await scanKeys(db.client, `${escapeGlob(prefix)}*`)).filter((k) => /\}:\d+$/.test(k))
    expect(Number(await db.client.get(key!))).toBeGreaterThan(40)
    await app.close()
    expect(Number(await db.client.get(key!))).toBe(40)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })
})
