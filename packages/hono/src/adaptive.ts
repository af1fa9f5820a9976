import { type AdaptiveConcurrencyOptions, AdaptiveFront, type AdaptiveGate, admitFetch } from '@tollgate/core/adapter'
import type { Context, Env, MiddlewareHandler } from 'hono'

export type { AdaptiveConcurrencyOptions, Priority } from '@tollgate/core/adapter'

// biome-ignore lint/suspicious/noExplicitAny: Hono's own default Env, so a middleware fits any app
export type AdaptiveConcurrencyMiddleware<E extends Env = any> = MiddlewareHandler<E> & {
  /** The gate behind the middleware: its limit, requests in flight, queue and refusals by class. */
  readonly gate: AdaptiveGate
}

/**
 * Protects the service as a whole: `app.use(adaptiveConcurrency())`, first. A per-process limit on requests
 * in flight that follows their latency; past it, a short queue, then 503 with Retry-After, lowest
 * `priority` class first (`priority: (c) => ...`). A request is in flight until Hono has its response or
 * the runtime aborts its signal. Per-client limits (rateLimit) still apply to each client.
 */
// biome-ignore lint/suspicious/noExplicitAny: as AdaptiveConcurrencyMiddleware
export function adaptiveConcurrency<E extends Env = any>(
  options?: AdaptiveConcurrencyOptions<Context<E>>,
): AdaptiveConcurrencyMiddleware<E> {
  const front = new AdaptiveFront<Context<E>>(options)
  const middleware: MiddlewareHandler<E> = async (c, next) => {
    const permit = await admitFetch(front, c, c.req.raw.signal)
    if (permit instanceof Response) return permit
    try {
      await next()
    } finally {
      permit.release(c.res.status === 503)
    }
  }
  return Object.assign(middleware, { gate: front.gate })
}
