import { createServer, type Server } from 'node:http'
import Router from '@koa/router'
import { rateLimit } from '@tollgate/koa'
import Koa from 'koa'
import { burst, close, listen } from '../support/http'

// Many connections at once through a listening server: the count the store returns decides, so
// exactly max requests pass however the burst interleaves. The clock is fixed so the whole burst
// falls in one window whatever its speed.
describe('concurrent bursts through Koa on the memory store', () => {
  let server: Server
  afterEach(() => close(server))

  async function start(max: number, route = false): Promise<string> {
    const now = Date.now()
    const app = new Koa()
    const router = new Router()
    app.use(rateLimit({ max: route ? 10_000 : max, window: '1 minute', clock: () => now }))
    router.get('/', ...(route ? [rateLimit({ max, window: '1 minute', clock: () => now })] : []), (ctx) => {
      ctx.body = 'ok'
    })
    app.use(router.routes())
    server = createServer(app.callback())
    return listen(server)
  }

  it('500 concurrent requests with max 50 give exactly 50 × 200', async () => {
    expect(await burst(await start(50), 500)).toEqual({ 200: 50, 429: 450 })
  }, 20_000)

  it('holds for a route limit too', async () => {
    expect(await burst(await start(50, true), 500)).toEqual({ 200: 50, 429: 450 })
  }, 20_000)
})
