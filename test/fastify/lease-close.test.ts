import { RedisStore } from '@tollgate/core'
import { rateLimit } from '@tollgate/fastify'
import Fastify from 'fastify'
import { escapeGlob, keysWithoutTtl, scanKeys, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { get } from '../support/http'

// `lease` through the fastify plugin: app.close() closes the plugin's limiter and the route limits it
// built, so the units they leased and did not spend go back to Redis instead of lapsing at the window's end.

const db = useRedis()

it('app.close() gives back what the plugin limit and a route limit leased and did not spend', async () => {
  const windowMs = 60_000
  const left = windowMs - (Date.now() % windowMs)
  if (left < 20_000) await new Promise((r) => setTimeout(r, left + 5)) // every request in one window
  const prefix = testPrefix('fastify-lease')
  const app = Fastify()
  await app.register(rateLimit, { max: 1000, window: '1m', prefix, lease: true, store: new RedisStore({ client: db.client }) })
  app.get('/', async () => 'ok')
  app.get('/own', { config: { rateLimit: { max: 2000, window: '1m' } } }, async () => 'ok')
  let closed = false
  try {
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    // Real time, so each limiter sees a rate and asks for more than one unit at a time.
    for (let i = 0; i < 40; i++) {
      expect((await get(url)).status).toBe(200)
      expect((await get(`${url}/own`)).status).toBe(200)
    }
    // The plugin's count (both routes) and the route's own: the counts, not the lessee markers.
    const keys = (await scanKeys(db.client, `${escapeGlob(prefix)}*`)).filter((k) => /\}:\d+$/.test(k))
    expect(keys).toHaveLength(2)
    const counts = async () => (await Promise.all(keys.map((k) => db.client.get(k)))).map(Number).sort((a, b) => a - b)
    const [own, plugin] = await counts()
    expect(own).toBeGreaterThan(40)
    expect(plugin).toBeGreaterThan(80)
    closed = true
    await app.close()
    expect(await counts()).toEqual([40, 80])
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  } finally {
    if (!closed) await app.close()
  }
})
