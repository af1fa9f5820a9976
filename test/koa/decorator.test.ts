import { createServer } from 'node:http'
import Router from '@koa/router'
import { RateLimit, rateLimit } from '@tollgate/koa'
import Koa, { type Context, type Next } from 'koa'
import request from 'supertest'

const quiet = { warn: () => {}, error: () => {} }
const clock = () => 1_763_729_100_250

class AccountController {
  calls = 0

  @RateLimit({ max: 2, window: '1 minute', clock, logger: quiet })
  async login(ctx: Context) {
    this.calls++
    ctx.body = { calls: this.calls }
    return this.calls
  }

  // A method used as middleware: it gets next and passes the request on.
  @RateLimit({ max: 1, window: '1 minute', clock, logger: quiet, message: 'one is enough' })
  async audit(ctx: Context, next?: Next) {
    ctx.set('X-Audited', 'yes')
    await next?.()
  }
}

describe('@RateLimit on a Koa controller', () => {
  it('runs the method until the limit, then answers 429 without running it', async () => {
    const controller = new AccountController()
    const app = new Koa()
    const router = new Router()
    app.use(rateLimit({ max: 100, clock, logger: quiet }))
    router.post('/login', (ctx) => controller.login(ctx))
    app.use(router.routes())
    const agent = request(createServer(app.callback()))
    await agent.post('/login').expect(200, { calls: 1 })
    const second = await agent.post('/login').expect(200, { calls: 2 })
    // The app's limit and the method's limit, one list member each.
    expect(second.headers.ratelimit).toBe('"100-per-1s";r=98;t=1, "2-per-1m";r=0;t=60')
    const refused = await agent.post('/login').expect(429)
    expect(refused.headers['retry-after']).toBe('60')
    expect(refused.headers['content-type']).toBe('application/problem+json')
    expect(controller.calls).toBe(2)
  })

  it('resolves to what the method returned when allowed, and to ctx when refused (routing-controllers then writes nothing)', async () => {
    const controller = new AccountController()
    const ctx = () =>
      ({ ip: '192.0.2.1', state: {}, headers: {}, get: () => '', set: () => {}, app: { proxy: false } }) as unknown as Context
    // The class-level limiter already counted for other clients; this one has its own count.
    await expect(controller.login(ctx())).resolves.toBe(1)
    await expect(controller.login(ctx())).resolves.toBe(2)
    const refused = ctx()
    await expect(controller.login(refused)).resolves.toBe(refused)
  })

  it('passes next through when the method is mounted as middleware', async () => {
    const controller = new AccountController()
    const app = new Koa()
    app.use((ctx, next) => controller.audit(ctx, next))
    app.use((ctx) => {
      ctx.body = 'done'
    })
    const agent = request(createServer(app.callback()))
    await agent.get('/').expect('X-Audited', 'yes').expect(200, 'done')
    const refused = await agent.get('/').expect(429, 'one is enough')
    expect(refused.headers['x-audited']).toBeUndefined()
  })
})
