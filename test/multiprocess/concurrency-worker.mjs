// A server process holding concurrency slots in a shared Redis, for the concurrency kill test. Uses the
// BUILT packages (as users do). Its /slow requests never end: the test kills this process by PID while
// they are in flight. Prints its port on stdout once listening.

import { RedisStore, rateLimit } from '@tollgate/express'
import express from 'express'
import { Redis } from 'ioredis'
import { createClient } from 'redis'

const { REDIS_URL, PREFIX, NOW, CLIENT } = process.env
const client = CLIENT === 'node-redis' ? await createClient({ url: REDIS_URL }).connect() : new Redis(REDIS_URL)
const now = Number(NOW)
const app = express()
app.use(
  rateLimit({
    algorithm: 'concurrency',
    max: 3,
    window: '1 minute',
    prefix: PREFIX,
    clock: () => now,
    store: new RedisStore({ client, timeout: '2s' }),
  }),
)
app.get('/slow', () => {})
const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`)
})
// Stop with the parent: the test kills us by PID, and stdin closing covers a crashed parent.
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
