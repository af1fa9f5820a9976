import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { join } from 'node:path'
import { RateLimit as ExpressRateLimit } from '@tollgate/express'
import { RateLimit as KoaRateLimit } from '@tollgate/koa'
import express from 'express'
import Fastify from 'fastify'
import Koa from 'koa'
import request from 'supertest'
import { compileFixtures, type DecoratorMode, fixture } from './compile'

type Plain = typeof import('./fixtures/plain')

/** An Express app whose error handler records what reaches it (a double write would). */
function expressApp() {
  const app = express()
  const errors: unknown[] = []
  const done = () => {
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(error)
      if (!res.headersSent) res.status(500).json({ message: (error as Error).message })
    })
    return request(createServer(app))
  }
  return { app, errors, done }
}

describe.each<DecoratorMode>(['legacy', 'standard'])('plain classes compiled by tsc with %s decorators', (mode) => {
  let plain: Plain
  let errors: string[]

  beforeAll(() => {
    const compiled = compileFixtures([fixture('plain.ts')], mode, 'plain')
    errors = compiled.errors
    const js = join(compiled.outDir, 'plain.js')
    // The two builds really differ: TypeScript's helper of each mode.
    expect(readFileSync(js, 'utf8')).toContain(mode === 'legacy' ? '__decorate(' : '__esDecorate(')
    plain = require(js)
  })

  it('type-checks with no error (no TS1241/TS1270)', () => {
    expect(errors).toEqual([])
  })

  it('Express: the 3rd request gets 429 with the RateLimit headers and Retry-After, and the app answers on', async () => {
    const { express: controller } = plain.controllers()
    const { app, errors, done } = expressApp()
    app.get('/hello', (req, res, next) => void controller.hello(req, res).catch(next))
    const agent = done()
    await agent.get('/hello').expect(200, { calls: 1 })
    const second = await agent.get('/hello').expect(200, { calls: 2 })
    expect(second.headers.ratelimit).toMatch(/^"2-per-1m";r=0;t=\d+$/)
    const refused = await agent.get('/hello').expect(429)
    expect(refused.headers.ratelimit).toMatch(/^"2-per-1m";r=0;t=\d+$/)
    expect(refused.headers['ratelimit-policy']).toBe('"2-per-1m";q=2;w=60')
    expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/)
    await agent.get('/hello').expect(429)
    expect(controller.calls).toBe(2)
    expect(errors).toEqual([])
  })

  it('Express: finds the request when it is not the first argument, and resolves to res when refused', async () => {
    const { express: controller } = plain.controllers()
    const { app, errors, done } = expressApp()
    const results: unknown[] = []
    app.get('/items/:id', (req, res, next) => {
      controller.lookup(String(req.params.id), req).then((result) => {
        results.push(result)
        // Refused: the 429 is sent and the call resolved to res.
        if (!res.headersSent) res.json(result)
      }, next)
    })
    const agent = done()
    await agent.get('/items/7').expect(200, { id: '7', ip: true })
    await agent.get('/items/8').expect(200, { id: '8', ip: true })
    const refused = await agent.get('/items/9').expect(429)
    expect(refused.headers['retry-after']).toBeDefined()
    expect(results).toHaveLength(3)
    expect(results[2]).toHaveProperty('headersSent', true) // the response object
    expect(errors).toEqual([])
  })

  it('Koa: the 3rd request gets 429 with the RateLimit headers and Retry-After', async () => {
    const { koa: controller } = plain.controllers()
    const app = new Koa()
    app.use((ctx) => controller.hello(ctx))
    const agent = request(createServer(app.callback()))
    await agent.get('/').expect(200, { calls: 1 })
    await agent.get('/').expect(200, { calls: 2 })
    const refused = await agent.get('/').expect(429)
    expect(refused.headers.ratelimit).toMatch(/^"2-per-1m";r=0;t=\d+$/)
    expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/)
    await agent.get('/').expect(429)
    expect(controller.calls).toBe(2)
  })

  it('fastify: the 3rd request gets 429 with the RateLimit headers and Retry-After', async () => {
    const { fastify: controller } = plain.controllers()
    const app = Fastify()
    app.get('/hello', (req, reply) => controller.hello(req, reply))
    await app.ready()
    try {
      const agent = request(app.server)
      await agent.get('/hello').expect(200, { calls: 1 })
      await agent.get('/hello').expect(200, { calls: 2 })
      const refused = await agent.get('/hello').expect(429)
      expect(refused.headers.ratelimit).toMatch(/^"2-per-1m";r=0;t=\d+$/)
      expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/)
      await agent.get('/hello').expect(429)
      expect(controller.calls).toBe(2)
    } finally {
      await app.close()
    }
  })

  it('a method that never receives a request fails every call with TG_DECORATOR_NO_REQUEST, on each adapter', async () => {
    const { express: e, koa: k, fastify: f } = plain.controllers()
    for (let i = 0; i < 3; i++) {
      await expect(e.orphan('7')).rejects.toMatchObject({
        name: 'TollgateError',
        code: 'TG_DECORATOR_NO_REQUEST',
        message:
          '@RateLimit on ExpressController.orphan() found no Express request (req) or response (res) among its 1 argument(s) (string), so it cannot limit the call; ' +
          "give it Express's req and res as its first parameters (req, res, next), or as @Req() / @Res() parameters (routing-controllers, NestJS on platform-express). " +
          'Under NestJS, @tollgate/nestjs is the way to limit controllers. [TG_DECORATOR_NO_REQUEST]',
      })
    }
    await expect(k.orphan('7')).rejects.toThrow(
      "@RateLimit on KoaController.orphan() found no Koa context (ctx) among its 1 argument(s) (string), so it cannot limit the call; give it Koa's ctx as a parameter",
    )
    expect(() => f.orphan({ id: 'r1', headers: {} } as never)).toThrow(
      '@RateLimit on FastifyController.orphan() found no fastify reply among its 1 argument(s) (object), so it cannot limit the call; give it (request, reply)',
    )
  })

  it('over HTTP, a method without its request answers 500 with the TollgateError, never unlimited', async () => {
    const { express: e, fastify: f } = plain.controllers()
    const { app, errors, done } = expressApp()
    app.get('/orphan', (_req, res, next) => void e.orphan('7').then((v) => res.json(v), next))
    const agent = done()
    for (let i = 0; i < 3; i++) await agent.get('/orphan').expect(500)
    expect(errors).toHaveLength(3)
    expect(errors[0]).toMatchObject({ code: 'TG_DECORATOR_NO_REQUEST' })

    const fastify = Fastify()
    fastify.get('/orphan', (req) => f.orphan(req))
    await fastify.ready()
    try {
      const refused = await request(fastify.server).get('/orphan').expect(500)
      expect(refused.body).toMatchObject({ code: 'TG_DECORATOR_NO_REQUEST' })
    } finally {
      await fastify.close()
    }
  })

  it("Express's decorator given Node's own req and res (not Express's) fails with the TollgateError, not a TypeError", async () => {
    const { express: controller } = plain.controllers()
    const server = createServer((req, res) => {
      controller.hello(req as never, res as never).catch((error: Error) => {
        res.statusCode = 500
        res.end(`${error.name}: ${error.message}`)
      })
    })
    const refused = await request(server).get('/').expect(500)
    expect(refused.text).toMatch(/^TollgateError: @RateLimit on ExpressController\.hello\(\) found no Express request \(req\)/)
  })
})

describe('@RateLimit applied to something other than a method', () => {
  it('throws TG_DECORATOR_TARGET at class definition, in either mode', () => {
    const legacy = () => ExpressRateLimit({ max: 2 })({}, 'total', { get: () => 1 } as never)
    expect(legacy).toThrow('@RateLimit decorates class methods, but was applied to Object.total(), which is not a method')
    const standard = () => KoaRateLimit({ max: 2 })(undefined as never, { kind: 'field', name: 'count' } as never)
    expect(standard).toThrow(
      expect.objectContaining({ code: 'TG_DECORATOR_TARGET', message: expect.stringContaining('a class field (count)') }),
    )
  })
})
