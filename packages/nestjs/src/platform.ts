import type { ServerResponse } from 'node:http'
import { type Decision, lowerHeaderName, type Rejection, type ResponseIO } from '@tollgate/core/adapter'
import { expressRecord, expressVisit } from '@tollgate/express/internal'

/**
 * The request as the guard gets it: an Express request on platform-express, a fastify request on
 * platform-fastify (or what a GraphQL context holds). Both resolve `ip` by their platform's trust-proxy setting.
 */
export interface NestRequest {
  ip?: string
  headers: Record<string, string | string[] | undefined>
  /** The decision of the last Tollgate limit that ran on this request. */
  rateLimit?: Decision
  /** Every Tollgate decision made on this request, in order (the module's limit first, then the class's, then the method's). */
  rateLimits?: Decision[]
}

/** What a refused or denied request is answered with: kept by the response until the guard throws it. */
export interface Refusal {
  rejection: Rejection
  /** The refusing decision; undefined for a client on the deny list. */
  decision: Decision | undefined
}

/** fastify's reply (platform-fastify): `code`, `header(s)` and the Node response under `raw`. */
interface FastifyLikeReply {
  code(status: number): unknown
  header(name: string, value: string): unknown
  raw: ServerResponse
}

function isFastifyReply(res: object): res is FastifyLikeReply {
  const r = res as Partial<FastifyLikeReply>
  return typeof r.code === 'function' && typeof r.header === 'function' && typeof r.raw === 'object' && r.raw !== null
}

/** An Express response (platform-express), or a bare Node response: both are ServerResponses. */
function isNodeResponse(res: object): res is ServerResponse {
  return typeof (res as Partial<ServerResponse>).setHeader === 'function'
}

/** The Node response under `res`, where there is one (none in a GraphQL context without `res`). */
function nodeResponse(res: object): ServerResponse | undefined {
  if (isFastifyReply(res)) return res.raw
  return isNodeResponse(res) ? res : undefined
}

/** Each refusal, by the response object the gate answered it on, until the guard throws it. */
const refusals = new WeakMap<object, Refusal>()

/** The refusal the gate left on `res` (and forgets it). */
export function takeRefusal(res: object): Refusal | undefined {
  const refusal = refusals.get(res)
  refusals.delete(res)
  return refusal
}

/** Keeps a refusal for the guard, which throws it as an HttpException so the app's exception filters see it. */
export function keepRefusal(res: object, refusal: Refusal): void {
  refusals.set(res, refusal)
}

/**
 * Nest's side of the response sequence (core's adapter.ts runs it). The platform is read from the
 * response object: a fastify reply has `code`/`header` and `raw`, an Express response is a Node
 * ServerResponse. Nothing is sent here: a refusal is kept for the guard, which throws it.
 */
export const io: ResponseIO<NestRequest, object> = {
  // Read as req.rateLimit and req.rateLimits on either platform: kept as @tollgate/express keeps them on
  // platform-express; a fastify request (no req.app, no res.locals) gets properties of its own.
  record: (req, _res, decision) => expressRecord(req, decision),
  // On platform-express marked in res.locals as @tollgate/express marks them; a fastify request has no
  // res.locals and is marked as @tollgate/fastify marks it.
  visit: expressVisit,
  setHeaders(res, headers) {
    // On fastify one reply.header per field with lower-case names, as @tollgate/fastify writes them.
    if (isFastifyReply(res)) for (const name in headers) res.header(lowerHeaderName(name), headers[name]!)
    else if (isNodeResponse(res)) for (const name in headers) res.setHeader(name, headers[name]!)
  },
  status(res, code) {
    if (isFastifyReply(res)) res.code(code)
    else if (isNodeResponse(res)) res.statusCode = code
  },
  // Only a client on the deny list gets here (refusals go through the gate's handler, with their decision).
  send: (res, rejection) => keepRefusal(res, { rejection, decision: undefined }),
  raw(res) {
    const raw = nodeResponse(res)
    if (raw === undefined) throw new TypeError('no Node response under this response object')
    return raw
  },
  completion(res, done) {
    const raw = nodeResponse(res)
    // No HTTP response to watch (a GraphQL context without `res`): the outcome is unknown, nothing is refunded.
    if (raw === undefined) return
    // Cut off while the store answered: closed already, and it will not close again.
    if (raw.destroyed) return done(500)
    raw.once('close', () => done(raw.writableFinished ? raw.statusCode : 500))
  },
}
