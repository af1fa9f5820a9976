import type { AddressInfo } from 'node:net'
import { type Decision, rateLimit } from '@tollgate/fastify'
import Fastify from 'fastify'

const app = Fastify()
await app.register(rateLimit, { max: 2, window: '1m' })
app.get('/', async (request) => {
  const decision: Decision | undefined = request.rateLimit
  return { remaining: decision?.remaining }
})
app.get('/health', { config: { rateLimit: false } }, async () => ({ ok: true }))
await app.listen({ port: 0, host: '127.0.0.1' })
console.log(`listening ${(app.server.address() as AddressInfo).port}`)
