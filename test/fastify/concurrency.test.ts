import { rateLimit } from '@tollgate/fastify'
import Fastify, { type FastifyInstance } from 'fastify'
import { burst } from '../support/http'

// Many connections at once through a listening server: the count the store returns decides, so
// exactly max requests pass however the burst interleaves. The clock is fixed so the whole burst
// falls in one window whatever its speed.
describe('concurrent bursts through fastify on the memory store', () => {
  let app: FastifyInstance
  afterEach(() => app.close())

  async function start(max: number, route = false): Promise<string> {
    const now = Date.now()
    app = Fastify()
    await app.register(rateLimit, { max: route ? 10_000 : max, window: '1 minute', clock: () => now })
    app.get('/', { config: route ? { rateLimit: { max } } : {} }, async () => 'ok')
    return app.listen({ port: 0, host: '127.0.0.1' })
  }

  it('500 concurrent requests with max 50 give exactly 50 × 200', async () => {
    expect(await burst(await start(50), 500)).toEqual({ 200: 50, 429: 450 })
  }, 20_000)

  it('holds for a route limit too', async () => {
    expect(await burst(await start(50, true), 500)).toEqual({ 200: 50, 429: 450 })
  }, 20_000)
})
