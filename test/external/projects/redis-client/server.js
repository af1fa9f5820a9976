// The client as its README has users make one, the store borrowing it. REDIS_URL names the suite's own
// redis-server; each run counts under a prefix of its own, so variants sharing the server do not meet.
import { RedisStore, rateLimit } from '@tollgate/express'
import express from 'express'

const url = process.env.REDIS_URL
let client
if (process.env.TOLLGATE_CLIENT === 'ioredis') {
  const { Redis } = await import('ioredis')
  client = new Redis(url)
  await client.ping()
} else {
  const { createClient } = await import('redis')
  client = createClient({ url })
  client.on('error', (error) => console.error(`redis: ${error.message}`))
  await client.connect()
}

const app = express()
const prefix = `external:${process.pid}:${Date.now()}:`
app.use(rateLimit({ max: 2, window: '1m', prefix, onStoreError: 'deny', store: new RedisStore({ client, timeout: '2s' }) }))
app.get('/', (req, res) => res.json({ remaining: req.rateLimit?.remaining, source: req.rateLimit?.source ?? 'store' }))
const server = app.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`))
