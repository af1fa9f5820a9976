import { MemoryStore, type RateLimitOptions, rateLimit, type Store } from '@tollgate/fastify'
import Fastify, { type FastifyInstance } from 'fastify'
import { allowInject } from './injectable'

// Route limits count in the plugin's store, and `group` shares one counter among routes.
allowInject()

const quiet = { warn: () => {}, error: () => {} }
const clock = () => 1_763_729_100_250

async function server(options: RateLimitOptions = {}): Promise<FastifyInstance> {
  const app = Fastify()
  await app.register(rateLimit, { max: 100, clock, logger: quiet, ...options })
  return app
}

/** The keys counted in `store` from now on. */
function keysCounted(store: MemoryStore | Store): string[] {
  const seen: string[] = []
  const increment = store.increment!.bind(store)
  store.increment = (key, ...rest) => {
    seen.push(key)
    return increment(key, ...rest)
  }
  return seen
}

const status = async (app: FastifyInstance, url: string) => (await app.inject({ url })).statusCode

describe('route limits and the plugin store', () => {
  it('counts route limits in the plugin’s own default store instance, each route under its own prefix', async () => {
    const app = await server()
    const store = app.rateLimiter.config.store
    expect(store).toBeInstanceOf(MemoryStore)
    const seen = keysCounted(store)
    app.get('/a', { config: { rateLimit: { max: 2, window: '1 minute' } } }, async () => 'a')
    app.get('/b', { config: { rateLimit: { max: 2, window: '1 minute' } } }, async () => 'b')
    expect([await status(app, '/a'), await status(app, '/a'), await status(app, '/a')]).toEqual([200, 200, 429])
    // /b keeps its own count in the same store.
    expect([await status(app, '/b'), await status(app, '/b'), await status(app, '/b')]).toEqual([200, 200, 429])
    // The plugin's key and both routes' keys went to the plugin's store: 6 requests, 2 limits each.
    expect(seen).toHaveLength(12)
    expect(new Set(seen.map((k) => k.replace(/127\.0\.0\.1.*$/, ''))).size).toBe(3)
    await app.close()
  })

  it('keeps a store the route names itself', async () => {
    const app = await server()
    const own = new MemoryStore()
    const inPlugin = keysCounted(app.rateLimiter.config.store)
    const inOwn = keysCounted(own)
    app.get('/a', { config: { rateLimit: { max: 1, store: own } } }, async () => 'a')
    expect(await status(app, '/a')).toBe(200)
    expect(await status(app, '/a')).toBe(429)
    expect([inPlugin.length, inOwn.length]).toEqual([2, 2])
    await app.close()
  })
})

describe('the group route option', () => {
  it('shares one counter among the routes of a group with the default store: the 4th request across them is 429', async () => {
    const app = await server()
    app.get('/search/users', { config: { rateLimit: { group: 'search', max: 3, window: '1 minute' } } }, async () => 'users')
    app.get('/search/posts', { config: { rateLimit: { group: 'search', max: 3, window: '1 minute' } } }, async () => 'posts')
    app.get('/other', { config: { rateLimit: { max: 3, window: '1 minute' } } }, async () => 'other')
    expect(await status(app, '/search/users')).toBe(200)
    expect(await status(app, '/search/posts')).toBe(200)
    const third = await app.inject({ url: '/search/users' })
    expect(third.headers.ratelimit).toBe('"100-per-1s";r=97;t=1, "3-per-1m";r=0;t=60')
    expect(await status(app, '/search/posts')).toBe(429)
    expect(await status(app, '/search/users')).toBe(429)
    // A route outside the group counts alone.
    expect(await status(app, '/other')).toBe(200)
    await app.close()
  })

  it('keeps groups of different names and different plugins apart', async () => {
    const app = Fastify()
    for (const prefix of ['/v1', '/v2']) {
      await app.register(
        async (scope) => {
          await scope.register(rateLimit, { max: 100, clock, logger: quiet })
          scope.get('/a', { config: { rateLimit: { group: 'g', max: 1 } } }, async () => 'a')
          scope.get('/b', { config: { rateLimit: { group: 'h', max: 1 } } }, async () => 'b')
        },
        { prefix },
      )
    }
    expect([await status(app, '/v1/a'), await status(app, '/v1/b'), await status(app, '/v2/a')]).toEqual([200, 200, 200])
    expect([await status(app, '/v1/a'), await status(app, '/v2/b'), await status(app, '/v2/b')]).toEqual([429, 200, 429])
    await app.close()
  })

  it('rejects a group that is not a non-empty string, naming the route and the value', async () => {
    const app = await server()
    expect(() => app.get('/x', { config: { rateLimit: { group: '' } } }, async () => 'x')).toThrow(
      'Route GET /x, config.rateLimit: Invalid option "group": expected a non-empty string, got "" (string) [TG_INVALID_OPTION]',
    )
    expect(() => app.get('/y', { config: { rateLimit: { group: 7 as unknown as string } } }, async () => 'y')).toThrow(
      'Invalid option "group": expected a non-empty string, got 7 (number) [TG_INVALID_OPTION]',
    )
  })

  it('rejects a route that brings other options to an existing group', async () => {
    const app = await server()
    app.get('/a', { config: { rateLimit: { group: 'search', max: 3 } } }, async () => 'a')
    expect(() => app.get('/b', { config: { rateLimit: { group: 'search', max: 5 } } }, async () => 'b')).toThrow(
      /Route GET \/b, config\.rateLimit: Invalid option "group": the routes of group "search" share one limit/,
    )
  })

  it('is a route option only: the plugin rejects it as unknown', async () => {
    await expect(Fastify().register(rateLimit, { group: 'search' } as RateLimitOptions)).rejects.toThrow(/Unknown option "group"/)
  })
})
