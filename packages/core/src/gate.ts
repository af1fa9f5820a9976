import type { Limiter } from './limiter/limiter'
import type { NodeResponseLike, Rejection } from './limiter/response'
import { type Decision, isThenable, type MaybePromise } from './types'
import { firstVisit } from './visits'

/*
 * The response sequence, once, for every adapter: an adapter supplies only its framework's I/O
 * (ResponseIO) and calls the gate for each request.
 */

/** An adapter's framework I/O, created once per adapter (never per request). */
export interface ResponseIO<Req, Res> {
  /** Exposes the decision where the framework's users read it; returns every decision made on this request so far, in order. */
  record(req: Req, res: Res, decision: Decision): readonly Decision[]
  /** Sets each header of the record on the response. */
  setHeaders(res: Res, headers: Record<string, string>): void
  /** Sets the status of a refused response, before the user's handler runs. */
  status(res: Res, code: number): void
  /** Sends the default refusal (the status is already set). */
  send(res: Res, rejection: Rejection): void
  /**
   * The Node response under `res`, for the completion hook (refunds, actualCost). An adapter whose
   * responses are not Node's (the Fetch API's) gives `completion` instead.
   */
  raw?(res: Res): NodeResponseLike
  /**
   * Calls `done` once the response is over, with its status (a response cut off counts as 500), for
   * a framework whose responses the raw 'close' misreads (fastify's inject()); at once when the
   * response was cut off already (the client left while the store answered). `response` is what the
   * options `requestWasSuccessful` and `actualCost` receive, when it is not `res` (a Fetch API adapter's
   * Response, known only once the handler returns it). @default the raw response's 'close'
   */
  completion?(res: Res, done: (statusCode: number, response?: unknown) => void): void
  /**
   * True the first time `limiter` meets this request: a limiter mounted twice on one request path
   * (app and route, a HEAD twin's hooks) counts it once. @default firstVisit
   */
  visit?(req: Req, limiter: object): boolean
}

/** The user's refusal handler as the adapter calls it: `extra` is what the adapter passed to the gate (Express: `next`). */
export type RefusalHandler<Req, Res, Extra> = (req: Req, res: Res, decision: Decision, extra: Extra) => unknown

/**
 * Applies a limiter to one request: resolves to true when the request may go on, false once the
 * refusal is sent. Throws (or rejects with) what `Limiter.check` throws, for the framework's error
 * handling.
 */
export type Gate<Req, Res, Extra = undefined> = (req: Req, res: Res, extra: Extra) => MaybePromise<boolean>

/**
 * The one response sequence, for every adapter:
 * 1. count once per request (`visit`), and skip what `skip` skips;
 * 2. record the decision where the framework exposes it, and set the headers for every decision so far;
 * 3. allowed: arm the completion hook when refunds or actualCost are on or the algorithm holds a slot per
 *    request (released when the response ends or is cut off), and go on;
 * 4. refused: set the status, then call the user's handler, or send the default refusal;
 *    a client on the deny list gets the deny status and body, and no quota headers.
 */
export function createGate<Req, Res, Extra = undefined>(
  limiter: Limiter<Req>,
  io: ResponseIO<Req, Res>,
  handler?: RefusalHandler<Req, Res, Extra>,
): Gate<Req, Res, Extra> {
  const visit = io.visit ?? firstVisit
  const completes = limiter.wantsCompletion
  const statusCode = limiter.config.statusCode
  const denyStatusCode = limiter.config.denyStatusCode
  // The functions on the way of every request create no closure: a function that does allocates its
  // captured variables on each call. The promise continuations are built in functions of their own.
  const sendRejection = (res: Res, rejection: Rejection): false => {
    io.send(res, rejection)
    return false
  }
  const sendLater = (res: Res, rejection: Promise<Rejection>): Promise<false> => rejection.then((r) => sendRejection(res, r))
  const refuse = (res: Res, rejection: MaybePromise<Rejection>): MaybePromise<false> =>
    isThenable(rejection) ? sendLater(res, rejection) : sendRejection(res, rejection)
  const armCompletion = (req: Req, res: Res, decision: Decision): void => {
    if (io.completion === undefined) limiter.afterResponse(req, res, io.raw!(res), decision)
    else io.completion(res, (code, response = res) => limiter.complete(req, response, decision, code))
  }
  const handled = (value: unknown): MaybePromise<false> => (isThenable(value) ? value.then(refused) : false)

  const respond = (req: Req, res: Res, extra: Extra, decision: Decision | undefined): MaybePromise<boolean> => {
    if (decision === undefined) return true
    if (decision.denied === true) {
      // On the deny list: no quota to show, the deny status and body.
      io.status(res, denyStatusCode)
      return refuse(res, limiter.denial(req, decision))
    }
    io.setHeaders(res, limiter.headers(io.record(req, res, decision)))
    if (decision.allowed) {
      if (completes) armCompletion(req, res, decision)
      return true
    }
    io.status(res, statusCode)
    if (handler !== undefined) return handled(handler(req, res, decision, extra))
    return refuse(res, limiter.rejection(req, decision))
  }
  const later = (req: Req, res: Res, extra: Extra, decision: Promise<Decision | undefined>): Promise<boolean> =>
    decision.then((d) => respond(req, res, extra, d))

  return (req, res, extra) => {
    if (!visit(req, limiter)) return true
    const decision = limiter.check(req)
    return isThenable(decision) ? later(req, res, extra, decision) : respond(req, res, extra, decision)
  }
}

const refused = (): false => false
