import {
  type AdaptiveConcurrencyOptions,
  AdaptiveFront,
  type AdaptiveGate,
  admitOn,
  isThenable,
  type ShedResponse,
} from '@tollgate/core/adapter'
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
  const middleware = (req: Request, res: Response, next: NextFunction) => {
    let answer: ReturnType<typeof admitOn<Request>>
    try {
      answer = admitOn(front, req, res)
    } catch (error) {
      return next(error)
    }
    if (isThenable(answer)) answer.then((a) => (a === true ? next() : shed(res, a)), next)
    else if (answer === true) next()
    else shed(res, answer)
  }
  return Object.assign(middleware, { gate: front.gate })
}

function shed(res: Response, answer: ShedResponse): void {
  res.status(answer.status)
  for (const name in answer.headers) res.setHeader(name, answer.headers[name]!)
  res.end(answer.body)
}
