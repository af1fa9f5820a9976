import { MemoryStore, rateLimit, type Store } from '@tollgate/express'
import express from 'express'

/** `store`: where counts live (a `RedisStore` when several processes serve the app); `prefix`: of every key it writes. */
export function createApp({ store = new MemoryStore() as Store, prefix = 'tg:' } = {}) {
  const app = express()

  // Every route: 100 requests a minute per client IP.
  app.use(rateLimit({ max: 100, window: '1m', name: 'global', prefix, store }))

  // The expensive route: 10 a minute on top, counted apart (its own prefix).
  const search = rateLimit({ max: 10, window: '1m', name: 'search', prefix: `${prefix}search:`, store })
  app.get('/search', search, (req, res) => {
    // Both decisions of this request, in order: the global one, then the route's.
    res.json({ limits: req.rateLimits?.map((d) => ({ policy: d.policy.name, remaining: d.remaining })) })
  })

  app.get('/', (req, res) => {
    res.json({ left: req.rateLimit?.remaining })
  })
  return app
}
