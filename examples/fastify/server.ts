// A fastify app limited to 10 requests per second per client IP, with a tighter limit of its own on
// POST /login and none on /health, on the in-memory store (set REDIS_URL to count in Redis instead).
// Run with `npx tsx examples/fastify/server.ts`.

import { RedisStore, rateLimit, type Store } from '@tollgate/fastify'
import Fastify from 'fastify'

async function redisStore(url: string): Promise<Store> {
  const { Redis } = await import('ioredis')
  return new RedisStore({ client: new Redis(url, { maxRetriesPerRequest: 1 }) })
}

async function main() {
  const store = process.env.REDIS_URL ? await redisStore(process.env.REDIS_URL) : undefined
  const app = Fastify()

  // Register it before the routes: it hooks into each route as the route is declared.
  await app.register(rateLimit, { max: 10, store })

  app.get('/', async (request) => ({ hello: 'world', remaining: request.rateLimit?.remaining }))

  // Stacked on the global limit (both show in the RateLimit headers); the store is inherited.
  app.post('/login', { config: { rateLimit: { max: 5, window: '1 minute' } } }, async () => ({ ok: true }))

  app.get('/health', { config: { rateLimit: false } }, async () => ({ ok: true }))

  const port = Number(process.env.PORT ?? 3000)
  try {
    await app.listen({ port, host: '127.0.0.1' })
  } catch (error) {
    console.error(`Could not listen on port ${port}: ${(error as Error).message} (set PORT to another port)`)
    process.exit(1)
  }
  const url = `http://127.0.0.1:${port}/`
  console.log(`Tollgate fastify demo listening on ${url} (store: ${store ? `Redis at ${process.env.REDIS_URL}` : 'memory'})`)
  console.log('Limit: 10 requests per second per client IP. See the 11th request refused:')
  console.log(`  for i in $(seq 1 12); do curl -s -o /dev/null -w "%{http_code} " ${url}; done; echo`)
  console.log(`  curl -si -X POST ${url}login | grep -i -E "^(HTTP|ratelimit|retry-after)"`)
}

void main()
