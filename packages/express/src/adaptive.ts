import { type AdaptiveConcurrencyOptions, AdaptiveFront, type AdaptiveGate, nodeMiddleware } from '@tollgate/core/adapter'
import type { NextFunction, Request, Response } from 'express'

export type { AdaptiveConcurrencyOptions, Priority } from '@tollgate/core/adapter'

export type AdaptiveConcurrencyMiddleware = ((req: Request, res: Response, next: NextFunction) => void) & {
  /** The gate behind the middleware: its limit, requests in flight, queue and refusals by class. */
  readonly gate: AdaptiveGate
}

/**
 * Protects the service as a whole: `app.use(adaptiveConcurrency())`, before the routes. A per-process limit
 * on requests in flight that follows their latency; past it, a short queue, then 503 with Retry-After,
 * lowest `priority` class first. Per-client limits (rateLimit) still apply to each client.
 */
export function adaptiveConcurrency(options?: AdaptiveConcurrencyOptions<Request>): AdaptiveConcurrencyMiddleware {
  const front = new AdaptiveFront<Request>(options)
  return Object.assign(nodeMiddleware<Request, Response>(front), { gate: front.gate })
}
