import { MemoryStore, rateLimit, type Store } from '@tollgate/express'
import express, { type Request } from 'express'

type Plan = 'free' | 'pro' | 'internal'

/** Requests a minute per plan. */
const PLANS: Record<Exclude<Plan, 'internal'>, number> = { free: 60, pro: 600 }

/** Stands in for your API-key lookup (a database, a cache, a JWT claim). */
const KEYS = new Map<string, Plan>([
  ['key-free', 'free'],
  ['key-pro', 'pro'],
  ['key-ops', 'internal'],
])

const planOf = (req: Request): Plan | undefined => KEYS.get(req.get('x-api-key') ?? '')

/** `store`: where counts live (a `RedisStore` when several processes serve the app); `prefix`: of every key it writes. */
export function createApp({ store = new MemoryStore() as Store, prefix = 'tg:' } = {}) {
  const app = express()

  // Unknown keys are turned away before they can count against anything.
  app.use((req, res, next) => {
    if (planOf(req) === undefined) res.status(401).json({ error: 'unknown API key' })
    else next()
  })
  app.use(
    rateLimit({
      key: (req) => req.get('x-api-key')!, // one quota per API key, whatever the client IP
      max: (req) => PLANS[planOf(req) as keyof typeof PLANS] ?? PLANS.free,
      window: '1m',
      allowList: (req) => planOf(req) === 'internal', // never limited, no headers
      prefix: `${prefix}api:`,
      store,
    }),
  )
  app.get('/v1/things', (req, res) => {
    res.json({ plan: planOf(req), left: req.rateLimit?.remaining })
  })
  return app
}
