import { randomUUID } from 'node:crypto'
import request from 'supertest'
import { createApp as apiPlanTiers } from '../../examples/recipes/api-plan-tiers'
import { createApp as globalAndRoute } from '../../examples/recipes/global-and-route'
import { createApp as loginBruteForce } from '../../examples/recipes/login-brute-force'
import { useRedis } from '../harness/use-redis'

// The recipes' apps (examples/recipes/, shown on the docs' Recipes pages) over real HTTP, on the memory
// store and on a RedisStore of the shared redis-server.

const db = useRedis()

/** The recipes count in one-minute windows aligned to the clock: start a scenario with at least 5 s left in the current one. */
async function inOneWindow(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 5000) await new Promise((resolve) => setTimeout(resolve, left + 50))
}

describe.each(db.stores())('on the %s store', (_name, makeStore) => {
  const options = () => ({ store: makeStore(), prefix: `tgtest:${randomUUID()}:` })

  describe('login brute force', () => {
    const login = (agent: request.Agent, username: string, password: string) => agent.post('/login').send({ username, password })

    it('locks an account out for 15 minutes from one client after 5 failed logins, without locking other accounts', async () => {
      await inOneWindow()
      const { app } = loginBruteForce(options())
      const agent = request.agent(app)
      for (let i = 0; i < 5; i++) await login(agent, 'ada', 'guess').expect(401)
      const locked = await login(agent, 'ada', 'guess').expect(429)
      expect(Number(locked.headers['retry-after'])).toBeGreaterThan(14 * 60)
      // The right password does not get through the lockout either...
      await login(agent, 'ada', 'correct horse').expect(429)
      // ...while another account from the same client is only counted.
      await login(agent, 'grace', 'guess').expect(401)
    })

    it('never counts a successful login', async () => {
      await inOneWindow()
      const { app } = loginBruteForce(options())
      const agent = request.agent(app)
      for (let i = 0; i < 12; i++) await login(agent, 'ada', 'correct horse').expect(200)
    })

    it('unlocks an account with unlock(ip, username), whatever the case of the name', async () => {
      await inOneWindow()
      const { app, unlock } = loginBruteForce(options())
      const agent = request.agent(app)
      for (let i = 0; i < 6; i++) await login(agent, 'ada', 'guess')
      await login(agent, 'ada', 'correct horse').expect(429)
      await unlock('127.0.0.1', 'Ada')
      await login(agent, 'ada', 'correct horse').expect(200)
    })
  })

  describe('API plan tiers', () => {
    it('gives each API key the quota of its plan, refuses unknown keys, and never limits internal keys', async () => {
      await inOneWindow()
      const agent = request.agent(apiPlanTiers(options()))
      await agent.get('/v1/things').expect(401)
      for (let i = 0; i < 60; i++) await agent.get('/v1/things').set('x-api-key', 'key-free').expect(200)
      const refused = await agent.get('/v1/things').set('x-api-key', 'key-free').expect(429)
      expect(refused.headers['ratelimit-policy']).toBe('"60-per-1m";q=60;w=60')

      const pro = await agent.get('/v1/things').set('x-api-key', 'key-pro').expect(200)
      expect(pro.headers['ratelimit-policy']).toBe('"600-per-1m";q=600;w=60')
      expect(pro.body).toEqual({ plan: 'pro', left: 599 })

      const internal = await agent.get('/v1/things').set('x-api-key', 'key-ops').expect(200)
      expect(internal.headers['ratelimit-policy']).toBeUndefined()
    })
  })

  describe('a global and a per-route limit', () => {
    it('refuses the 11th search of a minute while other routes keep the global quota, with both limits in the headers', async () => {
      await inOneWindow()
      const agent = request.agent(globalAndRoute(options()))
      for (let i = 0; i < 10; i++) await agent.get('/search').expect(200)
      const refused = await agent.get('/search').expect(429)
      expect(refused.headers['ratelimit-policy']).toBe('"global";q=100;w=60, "search";q=10;w=60')
      const home = await agent.get('/').expect(200)
      // 11 searches and this request counted globally.
      expect(home.body).toEqual({ left: 88 })
      const search = await agent.get('/search').expect(429)
      expect(search.headers.ratelimit).toMatch(/^"global";r=87;t=\d+, "search";r=0;t=\d+$/)
    })
  })
})
