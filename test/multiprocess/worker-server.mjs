// One of several Node processes sharing one Redis, for the multi-process test. Uses the BUILT
// packages (as users do). Prints its port on stdout once listening.

import { RedisStore, rateLimit } from '@tollgate/express'
import express from 'express'
import { Redis } from 'ioredis'

const { REDIS_URL, PREFIX, NOW, MAX } = process.env
const client = new Redis(REDIS_URL)
const now = Number(NOW)
const app = express()
app.use(
  rateLimit({ max: Number(MAX), window: '1 minute', prefix: PREFIX, clock: () => now, store: new RedisStore({ client, timeout: '2s' }) }),
)
app.get('/', (_req, res) => {
  res.send(String(process.pid))
})
const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`)
})
// Stop with the parent: the test kills us by PID, and stdin closing covers a crashed parent.
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
