import { AdaptiveGate, Permit, type Priority, type Shed } from './gate'
import { observeGate } from './metrics'
import { type AdaptiveConcurrencyOptions, parseAdaptiveOptions, shedBody } from './options'

/** What an adapter sends for a shed request. */
export interface ShedResponse {
  readonly status: 503
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/**
 * The adapters' side of adaptive concurrency, so each framework's middleware only wires it: a request's
 * class, the gate's answer, and the 503 of a shed request. A permit must be released once its response
 * has ended (or the connection closed), with `overloaded` when the service itself answered 503.
 */
export class AdaptiveFront<Req> {
  readonly gate: AdaptiveGate
  private readonly priority: ((req: Req) => Priority) | undefined

  constructor(options?: AdaptiveConcurrencyOptions<Req>) {
    const config = parseAdaptiveOptions(options)
    this.gate = new AdaptiveGate(config.gate)
    this.priority = config.priority
    observeGate(this.gate, config.name, config.meterProvider)
  }

  /** The gate's answer for `req`: a permit, a shed response, or a promise of one of them. */
  enter(req: Req): Permit | ShedResponse | Promise<Permit | ShedResponse> {
    let priority: Priority = 'normal'
    if (this.priority !== undefined) {
      const given = this.priority(req)
      // A class function that answers something else is a bug in the app: the request is treated as
      // normal rather than failing, and rather than jumping ahead of the critical ones.
      if (given === 'critical' || given === 'sheddable') priority = given
    }
    const answer = this.gate.acquire(priority)
    if (answer instanceof Promise) return answer.then(respond)
    return respond(answer)
  }
}

/** A Node response, or what of one the gate needs: its end (or its connection's) and its status. */
export interface ClosingResponse {
  once(event: 'close', listener: () => void): unknown
  readonly statusCode: number
}

/**
 * For the adapters on Node's http: enters `req`; with a permit, releases it when `raw` closes (the
 * response ended, or the client went away), as overload when the app answered 503 itself, and gives
 * true; when shed, gives the 503 to send.
 */
export function admitOn<Req>(
  front: AdaptiveFront<Req>,
  req: Req,
  raw: ClosingResponse,
): true | ShedResponse | Promise<true | ShedResponse> {
  const answer = front.enter(req)
  if (answer instanceof Promise) return answer.then((a) => held(a, raw))
  return held(answer, raw)
}

/** What of Node's response a shed request is written to. */
export interface WritableResponse extends ClosingResponse {
  statusCode: number
  setHeader(name: string, value: string): unknown
  end(body: string): unknown
}

/**
 * The `(req, res, next)` middleware of the frameworks on Node's http that take one (Express, and Nest on
 * either platform): a permitted request goes on (`next()`), a shed one gets its 503 here, an error of the
 * `priority` function goes to `next(error)`.
 */
export function nodeMiddleware<Req, Res extends WritableResponse>(
  front: AdaptiveFront<Req>,
): (req: Req, res: Res, next: (error?: unknown) => void) => void {
  return (req, res, next) => {
    let answer: true | ShedResponse | Promise<true | ShedResponse>
    try {
      answer = admitOn(front, req, res)
    } catch (error) {
      return next(error)
    }
    if (answer instanceof Promise) answer.then((a) => (a === true ? next() : writeShed(res, a)), next)
    else if (answer === true) next()
    else writeShed(res, answer)
  }
}

function writeShed(res: WritableResponse, answer: ShedResponse): void {
  res.statusCode = answer.status
  for (const name in answer.headers) res.setHeader(name, answer.headers[name]!)
  res.end(answer.body)
}

/**
 * For the adapters on the Fetch API: enters `req`; with a permit, releases it when `signal` aborts (the
 * client went away) and gives it, for the adapter to release once the handler's response is known (as
 * overload when the app answered 503 itself); when shed, gives the 503 as a Response.
 */
export async function admitFetch<Req>(front: AdaptiveFront<Req>, req: Req, signal: AbortSignal | undefined): Promise<Permit | Response> {
  const answer = await front.enter(req)
  if (!(answer instanceof Permit)) return new Response(answer.body, { status: answer.status, headers: answer.headers })
  if (signal?.aborted) answer.release()
  else signal?.addEventListener('abort', () => answer.release(), { once: true })
  return answer
}

function held(answer: Permit | ShedResponse, raw: ClosingResponse): true | ShedResponse {
  if (!(answer instanceof Permit)) return answer
  raw.once('close', () => answer.release(raw.statusCode === 503))
  return true
}

function respond(answer: Permit | Shed): Permit | ShedResponse {
  if (answer instanceof Permit) return answer
  return {
    status: 503,
    headers: { 'Retry-After': String(Math.ceil(answer.retryAfterMs / 1000)), 'Content-Type': 'application/problem+json' },
    body: shedBody(answer.priority),
  }
}

export { Permit }
