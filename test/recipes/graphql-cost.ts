import { Limiter, type Store } from '@tollgate/express'
import express from 'express'

export interface GraphQLRequest {
  query: string
  variables?: Record<string, unknown>
}

export interface GraphQLResult {
  data?: Record<string, unknown> | null
  errors?: Array<{ message: string; extensions?: Record<string, unknown> }>
}

/** Your GraphQL server's execution (graphql-js `graphql()`, Yoga's or Apollo's executeOperation...). */
export type Execute = (request: GraphQLRequest) => Promise<GraphQLResult>

/** Before executing: one point, plus every page size the query asks for (a literal or a variable). */
export function estimateCost({ query, variables = {} }: GraphQLRequest): number {
  let cost = 1
  for (const [, value] of query.matchAll(/\b(?:first|last)\s*:\s*(\$\w+|\d+)/g)) {
    const size = value!.startsWith('$') ? Number(variables[value!.slice(1)]) : Number(value)
    cost += Number.isSafeInteger(size) && size > 0 ? size : 100
  }
  return cost
}

/** After executing: one point, plus every object the result holds. */
export function actualCost(result: GraphQLResult): number {
  const objects = (value: unknown): number => {
    if (Array.isArray(value)) return value.reduce((n: number, v) => n + objects(v), 0)
    if (value === null || typeof value !== 'object') return 0
    return 1 + Object.values(value).reduce((n: number, v) => n + objects(v), 0)
  }
  return 1 + Object.values(result.data ?? {}).reduce((n: number, v) => n + objects(v), 0)
}

export function graphqlApp(store: Store, execute: Execute): express.Express {
  // A rolling hour. Not the default fixed window: its fast path counts refused requests too, so one
  // query estimated far over the points left would keep its client refused until the hour ends.
  const limiter = new Limiter({ algorithm: 'sliding-window', max: 5000, window: '1h', store, prefix: 'tg:graphql:' })
  const app = express()
  app.use(express.json())
  app.post('/graphql', async (req, res, next) => {
    try {
      const request = req.body as GraphQLRequest
      const decision = await limiter.consume(req.get('authorization') ?? req.ip ?? 'anonymous', estimateCost(request))
      res.set(limiter.headers([decision]))
      if (!decision.allowed) {
        const message = `This query's estimated cost, ${decision.cost} points, is more than this hour has left.`
        res.status(429).json({ errors: [{ message, extensions: { code: 'RATE_LIMITED', retryAfterMs: decision.retryAfterMs } }] })
        return
      }
      const result = await execute(request)
      // The points the query really cost, in the hour it was admitted in.
      await limiter.settle(decision, actualCost(result))
      res.json(result)
    } catch (error) {
      next(error)
    }
  })
  return app
}

// In your server, with the points shared by every process:
//   graphqlApp(new RedisStore({ client: new Redis(process.env.REDIS_URL) }), execute).listen(4000)
