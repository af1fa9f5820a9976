import { RateLimit, rateLimit } from '@tollgate/fastify'
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import { get } from '../support/http'

const quiet = { warn: () => {}, error: () => {} }
const clock = () => 1_763_729_100_250

class AccountController {
  calls = 0

  @RateLimit({ max: 2, window: '1 minute', clock, logger: quiet })
  async login(_request: FastifyRequest, _reply: FastifyReply) {
    this.calls++
    return { calls: this.calls }
  }

  // A sync handler that sends through the reply stays sync when the memory store answers.
  @RateLimit({ max: 1, window: '1 minute', clock, logger: quiet, message: 'one is enough' })
  hello(_request: FastifyRequest, reply: FastifyReply) {
    this.calls++
    reply.send('hello')
  }
}

describe('@RateLimit on a fastify controller', () => {
  const app = Fastify()
  const controller = new AccountController()
  let base: string

  beforeAll(async () => {
    await app.register(rateLimit, { max: 100, clock, logger: quiet })
    app.post('/login', (request, reply) => controller.login(request, reply))
    app.get('/hello', controller.hello.bind(controller))
    base = await app.listen({ port: 0, host: '127.0.0.1' })
  })
  afterAll(() => app.close())

  it('runs the method until the limit, then sends the 429 without running it', async () => {
    const first = await get(`${base}/login`, { method: 'POST' })
    expect([first.status, JSON.parse(first.body)]).toEqual([200, { calls: 1 }])
    const second = await get(`${base}/login`, { method: 'POST' })
    expect(JSON.parse(second.body)).toEqual({ calls: 2 })
    // The plugin's limit and the method's limit, one list member each.
    expect(second.headers.ratelimit).toBe('"100-per-1s";r=98;t=1, "2-per-1m";r=0;t=60')
    const refused = await get(`${base}/login`, { method: 'POST' })
    expect(refused.status).toBe(429)
    expect(refused.headers['retry-after']).toBe('60')
    expect(refused.headers['content-type']).toBe('application/problem+json')
    expect(controller.calls).toBe(2)
  })

  it('works on a handler that sends through the reply, and sends the refusal once', async () => {
    const calls = controller.calls
    const first = await get(`${base}/hello`)
    expect([first.status, first.body]).toEqual([200, 'hello'])
    const refused = await get(`${base}/hello`)
    expect([refused.status, refused.body, refused.headers['content-type']]).toEqual([429, 'one is enough', 'text/plain; charset=utf-8'])
    expect(controller.calls).toBe(calls + 1)
  })

  it('returns the reply when refused (synchronously on the memory store), so fastify knows the response is handled', async () => {
    const limited = new AccountController()
    const sent: unknown[] = []
    // The decorator finds the request through reply.request, as on a real reply.
    const exchange = () => {
      const request = { ip: '192.0.2.1', headers: {} } as unknown as FastifyRequest
      const reply = {
        request,
        code: () => reply,
        header: () => reply,
        headers: () => reply,
        send: (body: unknown) => void sent.push(String(body)),
      } as unknown as FastifyReply
      return [request, reply] as const
    }
    expect(limited.hello(...exchange())).toBeUndefined()
    const refused = exchange()
    expect(limited.hello(...refused)).toBe(refused[1])
    expect(sent).toEqual(['hello', 'one is enough'])
  })
})
