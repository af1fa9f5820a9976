import 'reflect-metadata'
import { createServer } from 'node:http'
import { join } from 'node:path'
import express from 'express'
import { useExpressServer } from 'routing-controllers'
import request from 'supertest'
import { compileFixtures, fixture } from './compile'

// The fixtures type-check only with experimentalDecorators (parameter decorators), which the repository's
// tsconfig does not set: their types are stated here rather than imported.
type Action = (...args: unknown[]) => Promise<unknown>
type Routing = { LimitedController: new () => { bare: Action } }
type Metadata = { Routes: { new (): Record<'below' | 'above', Action>; prototype: Record<'below' | 'above', Action> } }

/*
 * Classes compiled by tsc with experimentalDecorators + emitDecoratorMetadata, as routing-controllers
 * and NestJS projects build them, and served over real HTTP.
 */
let errors: string[]
let routing: Routing
let metadata: Metadata

beforeAll(() => {
  const compiled = compileFixtures([fixture('legacy/routing.ts'), fixture('legacy/metadata.ts')], 'legacy', 'routing')
  errors = compiled.errors
  routing = require(join(compiled.outDir, 'routing.js'))
  metadata = require(join(compiled.outDir, 'metadata.js'))
})

it('type-checks with experimentalDecorators, with no error (no TS1241/TS1270)', () => {
  expect(errors).toEqual([])
})

describe('@RateLimit from @tollgate/express on routing-controllers actions', () => {
  let agent: ReturnType<typeof request>
  /** What reaches Express's error handling after routing-controllers, by path: a second write would land here. */
  const failures: { path: string; error: unknown }[] = []

  beforeAll(() => {
    const app = express()
    useExpressServer(app, { controllers: [routing.LimitedController] })
    app.use((error: unknown, req: express.Request, res: express.Response, _next: express.NextFunction) => {
      failures.push({ path: req.path, error })
      if (!res.headersSent) res.status(500).end()
    })
    agent = request(createServer(app))
  })

  it.each([
    ['below the route decorator', '/rc/below', { route: 'below', calls: 1 }],
    ['above the route decorator, with only @Req() among other parameters', '/rc/above/7', { route: 'above', id: '7' }],
  ])(
    '%s: the 3rd request gets 429 with the headers, routing-controllers writes nothing more, the 4th is answered',
    async (_, path, body) => {
      const first = await agent.get(path).expect(200)
      expect(first.body).toEqual(body)
      const second = await agent.get(path).expect(200)
      expect(second.headers.ratelimit).toMatch(/^"2-per-1m";r=0;t=\d+$/)
      const refused = await agent.get(path).expect(429)
      expect(refused.headers['content-type']).toBe('application/problem+json')
      expect(refused.body).toMatchObject({ status: 429 })
      expect(refused.headers.ratelimit).toMatch(/^"2-per-1m";r=0;t=\d+$/)
      expect(refused.headers['ratelimit-policy']).toBe('"2-per-1m";q=2;w=60')
      expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/)
      await agent.get(path).expect(429)
      expect(failures.filter((f) => f.path === path)).toEqual([])
    },
  )

  it('an action without @Req()/@Res() answers 500 with TG_DECORATOR_NO_REQUEST on every call, never unlimited', async () => {
    for (let i = 0; i < 3; i++) {
      const failed = await agent.get('/rc/bare?q=1').expect(500)
      expect(failed.body).toMatchObject({ name: 'TollgateError', code: 'TG_DECORATOR_NO_REQUEST' })
      expect(failed.body.message).toContain('@RateLimit on LimitedController.bare() found no Express request (req) or response (res)')
      expect(failed.body.message).toContain('as @Req() / @Res() parameters')
    }
    await expect(new routing.LimitedController().bare('1')).rejects.toMatchObject({ code: 'TG_DECORATOR_NO_REQUEST' })
  })
})

describe("@RateLimit keeps the reflect-metadata route decorators write on the method (NestJS's @Get does)", () => {
  const { getMetadata } = Reflect as unknown as { getMetadata(key: string, target: object): unknown }

  it('is readable on the limited method whichever decorator runs first', () => {
    expect(getMetadata('path', metadata.Routes.prototype.below)).toBe('/path-below')
    expect(getMetadata('path', metadata.Routes.prototype.above)).toBe('/path-above')
  })

  it('a router that finds routes by that metadata serves limited routes, in both stacking orders', async () => {
    // A miniature of Nest's router: the route of each prototype method is its 'path' metadata.
    const app = express()
    const routes = new metadata.Routes()
    for (const name of ['below', 'above'] as const) {
      const path = getMetadata('path', metadata.Routes.prototype[name])
      if (typeof path === 'string') app.get(path, (req, res, next) => void routes[name](req, res).catch(next))
    }
    const agent = request(createServer(app))
    for (const [path, route] of [
      ['/path-below', 'below'],
      ['/path-above', 'above'],
    ] as const) {
      await agent.get(path).expect(200, { route })
      await agent.get(path).expect(200, { route })
      const refused = await agent.get(path).expect(429)
      expect(refused.headers['retry-after']).toBeDefined()
    }
  })
})
