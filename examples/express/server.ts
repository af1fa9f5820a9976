// The demo behind `npm start`: an Express app limited to 10 requests per second per client IP,
// on the in-memory store (set REDIS_URL to count in Redis instead).

import { RedisStore, rateLimit, type Store } from '@tollgate/express'
import express from 'express'

async function redisStore(url: string): Promise<Store> {
  const { Redis } = await import('ioredis')
  return new RedisStore({
    client: new Redis(url, { maxRetriesPerRequest: 1 }),
  })
}

async function main() {
  const store = process.env.REDIS_URL ? await redisStore(process.env.REDIS_URL) : undefined
  const app = express()

  app.use(rateLimit({ max: 10, store }))

  app.get('/', (req, res) => {
    res.json({ hello: 'world', remaining: req.rateLimit?.remaining })
  })

  // A tighter limit of its own on one route, stacked on the global one.
  app.post('/login', rateLimit({ max: 5, window: '1 minute', prefix: 'tg:login:', store }), (_req, res) => {
    res.json({ ok: true })
  })

  const port = Number(process.env.PORT ?? 3000)
  const server = app.listen(port, '127.0.0.1', () => {
    const url = `http://127.0.0.1:${port}/`
    console.log(`Tollgate demo listening on ${url} (store: ${store ? `Redis at ${process.env.REDIS_URL}` : 'memory'})`)
    console.log('Limit: 10 requests per second per client IP. See the 11th request refused:')
    console.log(`  for i in $(seq 1 12); do curl -s -o /dev/null -w "%{http_code} " ${url}; done; echo`)
    console.log(`  curl -si ${url} | grep -i -E "^(HTTP|ratelimit|retry-after)"`)
  })
  server.on('error', (error) => {
    console.error(`Could not listen on port ${port}: ${error.message} (set PORT to another port)`)
    process.exit(1)
  })
}

void main()
