import { type AdaptiveConcurrencyOptions, AdaptiveFront, type AdaptiveGate, admitOn } from '@tollgate/core/adapter'
import type { Context, Next } from 'koa'

export type { AdaptiveConcurrencyOptions, Priority } from '@tollgate/core/adapter'

export type AdaptiveConcurrencyMiddleware = ((ctx: Context, next: Next) => Promise<void>) & {
  /** The gate behind the middleware: its limit, requests in flight, queue and refusals by class. */
  readonly gate: AdaptiveGate
}

/**
 * Protects the service as a whole: `app.use(adaptiveConcurrency())`, first. A per-process limit on requests
 * in flight that follows their latency; past it, a short queue, then 503 with Retry-After, lowest
 * `priority` class first (`priority: (ctx) => ...`). Per-client limits (rateLimit) still apply to each client.
 */
export function adaptiveConcurrency(options?: AdaptiveConcurrencyOptions<Context>): AdaptiveConcurrencyMiddleware {
  const front = new AdaptiveFront<Context>(options)
  const middleware = async (ctx: Context, next: Next): Promise<void> => {
    const answer = await admitOn(front, ctx, ctx.res)
    if (answer === true) return next()
    ctx.status = answer.status
    ctx.set(answer.headers)
    ctx.body = answer.body
  }
  return Object.assign(middleware, { gate: front.gate })
}
