import { type AdaptiveConcurrencyOptions, AdaptiveFront, type AdaptiveGate, admitOn } from '@tollgate/core/adapter'
import type { FastifyReply, FastifyRequest } from 'fastify'

export type { AdaptiveConcurrencyOptions, Priority } from '@tollgate/core/adapter'

export type AdaptiveConcurrencyHook = ((request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined>) & {
  /** The gate behind the hook: its limit, requests in flight, queue and refusals by class. */
  readonly gate: AdaptiveGate
}

/**
 * Protects the service as a whole: `app.addHook('onRequest', adaptiveConcurrency())`. A per-process limit
 * on requests in flight that follows their latency; past it, a short queue, then 503 with Retry-After,
 * lowest `priority` class first (`priority: (request) => ...`). Per-client limits (rateLimit) still apply.
 */
export function adaptiveConcurrency(options?: AdaptiveConcurrencyOptions<FastifyRequest>): AdaptiveConcurrencyHook {
  const front = new AdaptiveFront<FastifyRequest>(options)
  const hook = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    const answer = await admitOn(front, request, reply.raw)
    if (answer === true) return undefined
    return reply.code(answer.status).headers(answer.headers).send(answer.body)
  }
  return Object.assign(hook, { gate: front.gate })
}
