import { createServer } from 'node:http'
import { rateLimit } from '@tollgate/express'
import express from 'express'
import request from 'supertest'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// "Unlock this account" over HTTP: an admin route calls the login limiter's reset, and the locked-out
// client's next login is no longer refused.

const db = useRedis()

describe.each(db.stores())('a lockout on the %s store', (_name, makeStore) => {
  it('ends when an admin route calls limiter.reset, and the next login is not 429', async () => {
    let now = 1_800_000_000_000 + 5_000
    const login = rateLimit({
      max: 2,
      window: '1m',
      blockDuration: '15m',
      key: (req) => String(req.headers['x-user']),
      store: makeStore(),
      prefix: testPrefix('express-unlock'),
      clock: () => now,
      logger: { warn() {}, error() {} },
    })
    const app = express()
    app.post('/login', login, (_req, res) => void res.send('ok'))
    app.post('/admin/unlock/:user', async (req, res) => {
      await login.limiter.reset(req.params.user)
      res.sendStatus(204)
    })
    const server = createServer(app)
    const agent = request(server)
    try {
      for (let i = 0; i < 2; i++) await agent.post('/login').set('x-user', 'alice').expect(200)
      const locked = await agent.post('/login').set('x-user', 'alice').expect(429)
      expect(locked.headers['retry-after']).toBe('900')
      now += 5 * 60_000 // later windows: only the block refuses
      expect((await agent.post('/login').set('x-user', 'alice').expect(429)).headers['retry-after']).toBe('600')

      await agent.post('/admin/unlock/alice').expect(204)
      await agent.post('/login').set('x-user', 'alice').expect(200)
    } finally {
      server.close()
    }
  })
})
