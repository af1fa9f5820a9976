import { type AdaptiveConcurrencyOptions, AdaptiveFront, type AdaptiveGate, admitFetch } from '@tollgate/core/adapter'

export type { AdaptiveConcurrencyOptions, Priority } from '@tollgate/core/adapter'

/** A handler wrapped by `withAdaptiveConcurrency`: the handler's own signature, answering 503 when shed. */
export type AdaptiveHandler<R extends Request, Rest extends unknown[], Out> = ((
  request: R,
  ...rest: [...Rest, ...unknown[]]
) => Promise<Out | Response>) & {
  /** The gate behind it: its limit, requests in flight, queue and refusals by class. */
  readonly gate: AdaptiveGate
}

/**
 * Protects the service as a whole, around the outermost handler: a per-process limit on requests in
 * flight that follows their latency; past it, a short queue, then 503 with Retry-After, lowest
 * `priority` class first (`priority: (request) => ...`). A request is in flight until the handler's
 * response is known (a streamed body's rest is not waited for) or the runtime aborts its signal.
 */
export function withAdaptiveConcurrency<R extends Request, Rest extends unknown[], Out>(
  handler: (request: R, ...rest: Rest) => Out | Promise<Out>,
  options?: AdaptiveConcurrencyOptions<R>,
): AdaptiveHandler<R, Rest, Out> {
  const front = new AdaptiveFront<R>(options)
  async function guarded(this: unknown, request: R, ...args: [...Rest, ...unknown[]]): Promise<Out | Response> {
    const permit = await admitFetch(front, request, request.signal)
    if (permit instanceof Response) return permit
    let response: Out
    try {
      response = await handler.call(this, request, ...(args as unknown as Rest))
    } catch (error) {
      permit.release()
      throw error
    }
    permit.release((response as { status?: unknown } | undefined)?.status === 503)
    return response
  }
  return Object.assign(guarded, { gate: front.gate })
}
