import type { IncomingMessage, ServerResponse } from 'node:http'
import { type AdaptiveConcurrencyOptions, AdaptiveFront, type AdaptiveGate, nodeMiddleware } from '@tollgate/core/adapter'

export type { AdaptiveConcurrencyOptions, Priority } from '@tollgate/core/adapter'

export type AdaptiveConcurrencyMiddleware = ((req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void) & {
  /** The gate behind the middleware: its limit, requests in flight, queue and refusals by class. */
  readonly gate: AdaptiveGate
}

/**
 * Protects the service as a whole, as a Nest middleware on either platform (Express or Fastify): in
 * `main.ts`, `app.use(adaptiveConcurrency())`, or `consumer.apply(adaptiveConcurrency()).forRoutes('*')` in a
 * module. It sees the request before Nest routes it: `priority` takes Node's request (its `url` and headers).
 */
export function adaptiveConcurrency(options?: AdaptiveConcurrencyOptions<IncomingMessage>): AdaptiveConcurrencyMiddleware {
  const front = new AdaptiveFront<IncomingMessage>(options)
  return Object.assign(nodeMiddleware<IncomingMessage, ServerResponse>(front), { gate: front.gate })
}
