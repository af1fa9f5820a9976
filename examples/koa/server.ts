// A Koa app limited to 10 requests per second per client IP, with a tighter limit of its own on
// POST /login, on the in-memory store (set REDIS_URL to count in Redis instead).
// Run with `npx tsx examples/koa/server.ts`.

import Router from '@koa/router'
import { RedisStore, rateLimit, type Store } from '@tollgate/koa'
import Koa from 'koa'

async function redisStore(url: string): Promise<Store> {
  const { Redis } = await import('ioredis')
  return new RedisStore({ client: new Redis(url, { maxRetriesPerRequest: 1 }) })
}

async function main() {
  const store = process.env.REDIS_URL ? await redisStore(process.env.REDIS_URL) : undefined
  const app = new Koa()
  const router = new Router()

  app.use(rateLimit({ max: 10, store }))

  router.get('/', (ctx) => {
    ctx.body = { hello: 'world', remaining: ctx.state.rateLimit?.remaining }
  })

  // A limit of its own, stacked on the global one; a shared store needs its own prefix.
  router.post('/login', rateLimit({ max: 5, window: '1 minute', prefix: 'tg:login:', store }), (ctx) => {
    ctx.body = { ok: true }
  })

  app.use(router.routes()).use(router.allowedMethods())

  const port = Number(process.env.PORT ?? 3000)
  const server = app.listen(port, '127.0.0.1', () => {
    const url = `http://127.0.0.1:${port}/`
    console.log(`Tollgate Koa demo listening on ${url} (store: ${store ? `Redis at ${process.env.REDIS_URL}` : 'memory'})`)
    console.log('Limit: 10 requests per second per client IP. See the 11th request refused:')
    console.log(`  for i in $(seq 1 12); do curl -s -o /dev/null -w "%{http_code} " ${url}; done; echo`)
    console.log(`  curl -si -X POST ${url}login | grep -i -E "^(HTTP|ratelimit|retry-after)"`)
  })
  server.on('error', (error) => {
    console.error(`Could not listen on port ${port}: ${error.message} (set PORT to another port)`)
    process.exit(1)
  })
}

void main()
