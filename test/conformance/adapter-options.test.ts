import { RateLimit as ExpressRateLimit, rateLimit as expressRateLimit } from '@tollgate/express'
import { type RateLimitOptions as FastifyOptions, RateLimit as FastifyRateLimit, rateLimit as fastifyRateLimit } from '@tollgate/fastify'
import { rateLimit as honoRateLimit } from '@tollgate/hono'
import { RateLimit as KoaRateLimit, rateLimit as koaRateLimit } from '@tollgate/koa'
import { rateLimit as webRateLimit, withRateLimit } from '@tollgate/web'
import Fastify, { type FastifyInstance } from 'fastify'

// The options each adapter adds to the core's (a refusal handler, fastify's hook, a fastify route's
// own config.rateLimit) are checked like the core's: when the middleware is built, the plugin
// registered or the route declared, never on the first request, and the error names the option and
// the value it got (STYLE.md §6-7). Only the public behaviour is asserted, not where the check lives.

/** A way to hand one adapter option a value: resolves once the adapter accepted it, throws or rejects otherwise. */
type Build = (value: unknown) => unknown

const apps: FastifyInstance[] = []
afterEach(async () => {
  await Promise.allSettled(apps.splice(0).map((app) => app.close()))
})

function fastify(): FastifyInstance {
  const app = Fastify()
  apps.push(app)
  return app
}

/** A fastify app with the plugin registered, then one route declared with `rateLimit` as its config. */
async function fastifyRoute(rateLimit: unknown): Promise<void> {
  const app = fastify()
  await app.register(fastifyRateLimit, { max: 10 })
  app.get('/x', { config: { rateLimit: rateLimit as FastifyOptions } }, async () => 'x')
  await app.ready()
}

const build: Record<string, Build> = {
  'Express rateLimit()': (value) => expressRateLimit({ handler: value as never }),
  'Express @RateLimit()': (value) => ExpressRateLimit({ handler: value as never }),
  'Koa rateLimit()': (value) => koaRateLimit({ handler: value as never }),
  'Koa @RateLimit()': (value) => KoaRateLimit({ handler: value as never }),
  'fastify register() handler': (value) => fastify().register(fastifyRateLimit, { handler: value as never }),
  'fastify @RateLimit()': (value) => FastifyRateLimit({ handler: value as never }),
  'fastify register() hook': (value) => fastify().register(fastifyRateLimit, { hook: value as never }),
  'fastify route config.rateLimit.handler': (value) => fastifyRoute({ max: 1, handler: value }),
  'fastify route config.rateLimit.hook': (value) => fastifyRoute({ max: 1, hook: value }),
  'fastify route config.rateLimit': (value) => fastifyRoute(value),
  'web withRateLimit() ip': (value) => withRateLimit(() => new Response(), { ip: value as never }),
  'web rateLimit() trustProxy': (value) => webRateLimit({ trustProxy: value as never }),
  'web withRateLimit() handler': (value) => withRateLimit(value as never),
  'Hono rateLimit() getConnInfo': (value) => honoRateLimit({ getConnInfo: value as never }),
  'Hono rateLimit() trustProxy': (value) => honoRateLimit({ trustProxy: value as never }),
}

// [where, option the message must name, bad value, how the message must show it]
const badValues: Array<[string, string, unknown, string]> = [
  ['Express rateLimit()', '"handler"', 'send a 429', '"send a 429" (string)'],
  ['Express rateLimit()', '"handler"', 42, '42 (number)'],
  ['Express rateLimit()', '"handler"', null, 'null'],
  ['Express @RateLimit()', '"handler"', { status: 429 }, '{"status":429} (object)'],
  ['Koa rateLimit()', '"handler"', 'send a 429', '"send a 429" (string)'],
  ['Koa rateLimit()', '"handler"', null, 'null'],
  ['Koa @RateLimit()', '"handler"', true, 'true (boolean)'],
  ['fastify register() handler', '"handler"', 'send a 429', '"send a 429" (string)'],
  ['fastify register() handler', '"handler"', null, 'null'],
  ['fastify @RateLimit()', '"handler"', 42, '42 (number)'],
  ['fastify register() hook', '"hook"', 'onSend', '"onSend" (string)'],
  ['fastify register() hook', '"hook"', 'prehandler', '"prehandler" (string)'],
  ['fastify register() hook', '"hook"', 1, '1 (number)'],
  ['fastify register() hook', '"hook"', null, 'null'],
  ['fastify route config.rateLimit.handler', '"handler"', 'send a 429', '"send a 429" (string)'],
  ['fastify route config.rateLimit.hook', '"hook"', 'onResponse', '"onResponse" (string)'],
  ['fastify route config.rateLimit', 'config.rateLimit', true, 'true (boolean)'],
  ['fastify route config.rateLimit', 'config.rateLimit', 'strict', '"strict" (string)'],
  ['fastify route config.rateLimit', 'config.rateLimit', 10, '10 (number)'],
  ['fastify route config.rateLimit', 'config.rateLimit', null, 'null'],
  ['fastify route config.rateLimit', 'config.rateLimit', [], 'an array of 0 (array)'],
  ['web withRateLimit() ip', '"ip"', 'x-real-ip', '"x-real-ip" (string)'],
  ['web rateLimit() trustProxy', '"trustProxy"', true, 'true (boolean)'],
  ['web rateLimit() trustProxy', '"trustProxy"', -1, '-1 (number)'],
  ['web withRateLimit() handler', '"handler"', null, 'null'],
  ['Hono rateLimit() getConnInfo', '"getConnInfo"', 'bun', '"bun" (string)'],
  ['Hono rateLimit() trustProxy', '"trustProxy"', '1', '"1" (string)'],
]

/** The error `attempt` threw or rejected with; fails the test if it was accepted. */
async function rejection(attempt: () => unknown): Promise<Error & { code?: unknown }> {
  try {
    await attempt()
  } catch (error) {
    return error as Error & { code?: unknown }
  }
  throw new Error('the value was accepted; expected it to be rejected')
}

describe('adapter options are validated when the limit is built', () => {
  it.each(badValues)('%s rejects %s = %p, naming the option and the value', async (where, option, value, shown) => {
    const error = await rejection(() => build[where]!(value))
    expect(error.code).toBe('TG_INVALID_OPTION')
    expect(error.message).toContain(option)
    expect(error.message).toContain(`got ${shown}`)
  })

  // The other half: the same entry points accept what the options are documented to take, so the
  // rejections above come from the values, not from a broken way of building.
  const handler = () => {}
  it.each([
    ['Express rateLimit()', 'a handler function', handler],
    ['Express @RateLimit()', 'a handler function', handler],
    ['Koa rateLimit()', 'a handler function', handler],
    ['Koa @RateLimit()', 'a handler function', handler],
    ['fastify register() handler', 'a handler function', handler],
    ['fastify @RateLimit()', 'a handler function', handler],
    ['fastify register() hook', '"preHandler"', 'preHandler'],
    ['fastify register() hook', 'no hook (the default)', undefined],
    ['fastify route config.rateLimit.handler', 'a handler function', handler],
    ['fastify route config.rateLimit.hook', '"onRequest"', 'onRequest'],
    ['fastify route config.rateLimit', 'false', false],
    ['fastify route config.rateLimit', 'an object of options', { max: 1 }],
    ['web withRateLimit() ip', 'an ip function', () => '203.0.113.7'],
    ['web rateLimit() trustProxy', 'a hop count', 2],
    ['Hono rateLimit() getConnInfo', 'a getConnInfo function', () => ({ remote: { address: '203.0.113.7' } })],
    ['Hono rateLimit() trustProxy', 'no proxies (0)', 0],
  ] as Array<[string, string, unknown]>)('%s accepts %s', async (where, _label, value) => {
    await build[where]!(value)
  })
})
