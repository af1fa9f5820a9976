import { type Decision, type Limiter, rateLimit, type Store } from '@tollgate/express'
import express, { type Request } from 'express'

/** Who a request acts for: your authentication's answer (a session, a JWT, an API key lookup). */
export interface Account {
  user: string
  tenant: string
}

/** Each plan's numbers: a user's requests per minute, and their whole tenant's. */
export interface Plan {
  perUser: number
  perTenant: number
}

export function tenantApi(options: {
  store: Store
  authenticate: (req: Request) => Account | undefined
  plan?: Plan
  /** Each limiter sharing a store needs its own key prefix. */
  prefix?: string
}): { app: express.Express; limiter: Limiter<Request> } {
  const { store, authenticate, plan = { perUser: 100, perTenant: 1000 }, prefix = 'tg:api:' } = options
  const accounts = new WeakMap<Request, Account>()
  const account = (req: Request) => accounts.get(req)!

  const app = express()
  app.use((req, res, next) => {
    const found = authenticate(req)
    if (found === undefined) {
      res.status(401).json({ error: 'unknown API key' })
      return
    }
    accounts.set(req, found)
    next()
  })

  // One decision over both keys: a request counts for its user and its tenant, or for neither.
  const limit = rateLimit({
    key: (req) => `user:${account(req).user}`,
    limits: [
      { max: plan.perUser, window: '1m', name: 'user' },
      { max: plan.perTenant, window: '1m', name: 'tenant', key: (req) => `tenant:${account(req).tenant}` },
    ],
    // The tenant's keys share one Redis Cluster slot (optional on a single Redis, or in memory).
    hashTag: (req) => account(req).tenant,
    store,
    prefix,
  })
  app.use(limit)
  app.get('/v1/reports', (_req, res) => {
    res.json({ reports: [] })
  })
  return { app, limiter: limit.limiter }
}

/** A background job of an account, counted by the same limits as its requests. */
export async function runJob(limiter: Limiter<Request>, who: Account, work: () => Promise<void>): Promise<Decision> {
  const decision = await limiter.consume(`user:${who.user}`, {
    keys: [undefined, `tenant:${who.tenant}`],
    hashTag: who.tenant,
  })
  if (decision.allowed) await work()
  return decision
}
