import { createGate, type ResponseIO } from './gate'
import type { Limiter } from './limiter/limiter'
import type { Rejection } from './limiter/response'
import { type Decision, isThenable, type MaybePromise } from './types'

/*
 * The response sequence (gate.ts) on the Fetch API, for @tollgate/web and @tollgate/hono: a Request in,
 * and out the header fields for the response, the refusal as a Response, and a hook for the response's
 * end. Nothing here knows a runtime or a framework; each adapter says only where a request's decisions
 * are kept (`record`) and hands the headers and the refusal over its own way.
 */

/** A request's answer from one limit, for a Fetch API adapter. */
export interface FetchReply {
  /** True when the request goes on to the handler (allowed, or skipped by `skip`). */
  readonly go: boolean
  /** This limit's decision; undefined when `skip` skipped the request. */
  readonly decision: Decision | undefined
  /** Header fields for the response: the quota fields (RateLimit, RateLimit-Policy...), and on a refusal Retry-After and Cache-Control. */
  readonly headers: Headers
  /** The refusal to send (429 with a problem-details body, the deny list's 403), headers included; undefined when the request goes on. */
  readonly response: Response | undefined
  /**
   * Reports the response sent: the Response, or its status when there is none to give (500 for a
   * handler that threw, 101 for a WebSocket upgrade on Bun). It matters when the limit counts by outcome
   * (`skipFailedRequests`, `skipSuccessfulRequests`, `actualCost`, which then receive the Response) or
   * holds a slot per request (algorithm "concurrency"), and does nothing otherwise. Call it once, when
   * the response is known.
   */
  complete(response: Response | number): void
}

/** The gate's response while it is built: status, fields and refusal, then the completion hook. */
class Reply implements FetchReply {
  go = true
  decision: Decision | undefined = undefined
  status = 200
  readonly headers = new Headers()
  response: Response | undefined = undefined
  done: ((statusCode: number, response?: unknown) => void) | undefined = undefined

  complete(response: Response | number): void {
    const done = this.done
    this.done = undefined
    if (typeof response === 'number') done?.(response, undefined)
    else done?.(response.status, response)
  }
}

/**
 * The gate of `limiter` for Fetch API requests (`Req` is what the limiter's options receive: the
 * Request, or a framework's context around it). `record` keeps a decision where the framework's users
 * read it and returns every decision made on the request so far, in order; `signalOf` gives the
 * request's signal, which the runtime aborts when the client goes away: the response is then over, cut
 * off (a 500), and a concurrency slot frees at once rather than when the handler ends.
 */
export function fetchGate<Req>(
  limiter: Limiter<Req>,
  record: (req: Req, decision: Decision) => readonly Decision[],
  signalOf: (req: Req) => AbortSignal | undefined,
): (req: Req) => MaybePromise<FetchReply> {
  const io: ResponseIO<Req, Reply> = {
    record(req, reply, decision) {
      reply.decision = decision
      return record(req, decision)
    },
    setHeaders(reply, headers) {
      for (const name in headers) reply.headers.set(name, headers[name]!)
    },
    status(reply, code) {
      reply.status = code
    },
    send(reply, rejection: Rejection) {
      reply.headers.set('content-type', rejection.contentType)
      reply.response = new Response(rejection.body, { status: reply.status, headers: reply.headers })
    },
    completion(reply, done) {
      reply.done = done
    },
  }
  const gate = createGate<Req, Reply>(limiter, io)
  const settle = (req: Req, reply: Reply, go: boolean): Reply => {
    reply.go = go
    if (reply.done !== undefined) {
      const signal = signalOf(req)
      // Aborted already: the client left while the store answered.
      if (signal?.aborted) reply.complete(500)
      else signal?.addEventListener('abort', () => reply.complete(500), { once: true })
    }
    return reply
  }
  return (req) => {
    const reply = new Reply()
    const go = gate(req, reply, undefined)
    return isThenable(go) ? go.then((g) => settle(req, reply, g)) : settle(req, reply, go)
  }
}

/**
 * `response` with `headers` added, the fields it has already kept as they are (a limit nearer the
 * handler has written them for every decision so far). A response whose headers are immutable (one
 * from fetch(), Response.redirect()) is copied first; one that cannot be copied (a WebSocket upgrade's
 * 101) is returned as it is.
 */
export function withHeaders(response: Response, headers: Headers): Response {
  let target = response
  for (const [name, value] of headers) {
    if (target.headers.has(name)) continue
    try {
      target.headers.set(name, value)
    } catch {
      if (target !== response) return response
      try {
        target = new Response(response.body, response)
      } catch {
        return response
      }
      target.headers.set(name, value)
    }
  }
  return target
}
