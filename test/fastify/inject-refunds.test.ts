import { type RateLimitOptions, rateLimit } from '@tollgate/fastify'
import Fastify, { type FastifyInstance } from 'fastify'
import { sleep } from '../support/time'
import { allowInject } from './injectable'

// fastify users test with app.inject(), whose responses never reach a socket: refunds must read
// them as finished, not as cut off.
allowInject()

const quiet = { warn: () => {}, error: () => {} }
const clock = () => 1_763_729_100_250

async function server(options: RateLimitOptions): Promise<FastifyInstance> {
  const app = Fastify()
  await app.register(rateLimit, { clock, logger: quiet, ...options })
  app.post('/login', async (request, reply) =>
    request.headers['x-password'] === 'right' ? { ok: true } : reply.code(401).send({ ok: false }),
  )
  app.get('/boom', async () => {
    throw new Error('boom')
  })
  app.get('/', async () => 'ok')
  return app
}

describe('refunds under fastify.inject()', () => {
  it('skipSuccessfulRequests: the next injected request already sees the refund; successful logins do not count, the 4th failed one gets 429', async () => {
    const app = await server({ max: 3, window: '1 minute', skipSuccessfulRequests: true })
    const login = async (password: string) => {
      return (await app.inject({ method: 'POST', url: '/login', headers: { 'x-password': password } })).statusCode
    }
    for (let i = 0; i < 10; i++) expect(await login('right')).toBe(200)
    for (let i = 0; i < 3; i++) expect(await login('wrong')).toBe(401)
    expect(await login('wrong')).toBe(429)
    await app.close()
  })

  it('skipFailedRequests: errors do not count, the 3rd successful request gets 429', async () => {
    const app = await server({ max: 2, window: '1 minute', skipFailedRequests: true })
    const get = async (url: string) => (await app.inject({ url })).statusCode
    for (let i = 0; i < 5; i++) expect(await get('/boom')).toBe(500)
    expect(await get('/')).toBe(200)
    expect(await get('/')).toBe(200)
    expect(await get('/')).toBe(429)
    await app.close()
  })

  it('skipFailedRequests on a route limit refunds an injected 4xx', async () => {
    const app = await server({ max: 100 })
    app.get('/search', { config: { rateLimit: { max: 1, window: '1 minute', skipFailedRequests: true } } }, async (request, reply) =>
      request.query && (request.query as { q?: string }).q ? 'found' : reply.code(400).send('q?'),
    )
    for (let i = 0; i < 3; i++) expect((await app.inject({ url: '/search' })).statusCode).toBe(400)
    expect((await app.inject({ url: '/search?q=a' })).statusCode).toBe(200)
    expect((await app.inject({ url: '/search?q=b' })).statusCode).toBe(429)
    await app.close()
  })
})

describe('refunds over real HTTP', () => {
  // A response cut off before it finished counts as failed, as core reads a raw 'close' (unchanged since).
  it.each([
    ['skipFailedRequests refunds', { skipFailedRequests: true }, 200],
    ['skipSuccessfulRequests keeps', { skipSuccessfulRequests: true }, 429],
  ])('reads a response cut off as failed: %s it', async (_name, skip, next) => {
    const app = await server({ max: 1, window: '1 minute', ...skip })
    app.get('/cut', async (request, reply) => {
      request.raw.socket.destroy()
      return reply
    })
    const base = await app.listen({ port: 0, host: '127.0.0.1' })
    await expect(fetch(`${base}/cut`)).rejects.toThrow()
    await sleep(20)
    expect((await fetch(`${base}/`)).status).toBe(next)
    await app.close()
  })
})
