import { describeDuration } from '../duration'
import { rateLimitHeaders } from '../headers'
import type { LimiterOptions } from '../options/limiter-options'
import type { Config } from '../options/parse-options'
import { algorithmOf } from '../registry'
import { STATUS_TITLES } from '../status-titles'
import { type Decision, isThenable, type MaybePromise, type Policy } from '../types'
import { HeaderRecords } from './fast-path/header-records'
import type { Settling } from './settling'

/** The body of a refused request, ready to send. */
export interface Rejection {
  status: number
  contentType: string
  body: string
  /**
   * `body` encoded in UTF-8, once: what adapters write (a default refusal is rendered once per policy).
   * A Buffer where the runtime has one (Node, Bun), which Node's frameworks write as bytes.
   */
  bytes: Uint8Array
}

/** The parts of Node's http.ServerResponse that the completion hook reads (typed here: core imports no node:http). */
export interface NodeResponseLike {
  readonly destroyed: boolean
  readonly writableFinished: boolean
  readonly statusCode: number
  once(event: 'close', listener: () => void): unknown
}

/**
 * UTF-8 bytes of a refusal's body: a Buffer where there is one, since Koa and NestJS tell bytes from an
 * object to serialise by Buffer.isBuffer; a Uint8Array elsewhere.
 */
const encode: (text: string) => Uint8Array =
  typeof Buffer === 'function' ? (text) => Buffer.from(text) : (text) => new TextEncoder().encode(text)

/** Policies whose default refusal is kept rendered. */
const MAX_CACHED_REJECTIONS = 256

/** The record of an allowed request when allowed responses carry no fields (`headers: false`, or `headersOn: "refused"`). */
const NO_FIELDS: Readonly<Record<string, string>> = Object.freeze({})

const refusalDetail = (d: Decision): string =>
  d.policy.quotaUnit === 'concurrent-requests'
    ? `Too many requests in flight: the limit is ${d.limit} at once. Retry after the number of seconds in the Retry-After header.`
    : `Too many requests: the limit is ${d.limit} per ${describeDuration(d.policy.windowMs)}. Retry after the number of seconds in the Retry-After header.`
const denialDetail = (): string => 'This client may not make requests here.'

/**
 * What a decision looks like on the wire: the header record, the refusal (status, content type,
 * body), and the completion hook that reports a response's outcome for refunds.
 */
export class ResponseParts<Req> {
  private readonly rejections = new Map<Policy, Rejection>()
  private readonly denials = new Map<Policy, Rejection>()
  /** Records of allowed requests under one limit, kept (fast-path/header-records.ts). */
  private readonly records: HeaderRecords
  /** Allowed responses carry no fields: their record is NO_FIELDS, built by nothing. */
  private readonly quietAllowed: boolean
  /** Each admitted request holds what it counted until its response ends (algorithm "concurrency"). */
  private readonly releases: boolean

  constructor(
    private readonly config: Config<Req>,
    private readonly onError: (name: string, error: unknown) => void,
    private readonly refund: (decision: Decision) => Promise<void>,
    /** `actualCost` (settling.ts): registered whenever the option is set (parse-options.ts refuses it otherwise). */
    private readonly settling: Settling | undefined,
  ) {
    const draft8 = config.headers === 'draft-8' && !config.legacyHeaders && config.headersOn !== 'refused'
    this.records = new HeaderRecords(draft8, config.legacyHeaders, (decisions) => this.build(decisions))
    this.quietAllowed = (config.headers === false && !config.legacyHeaders) || config.headersOn === 'refused'
    this.releases = algorithmOf(config.algorithm).releases === true
  }

  /** True when the response's end or outcome matters (the skip*Requests options, `actualCost`, algorithm "concurrency"). */
  get wantsCompletion(): boolean {
    return this.config.skipFailedRequests || this.config.skipSuccessfulRequests || this.config.actualCost !== undefined || this.releases
  }

  /**
   * The header record for the decisions made on one request. An allowed request under one limit gets
   * a record kept per policy, remaining and reset second (HeaderRecords): shared, so never modified.
   */
  headers(decisions: readonly Decision[]): Readonly<Record<string, string>> {
    if (decisions.length === 1) {
      const d = decisions[0]!
      if (d.allowed && d.limits === undefined) return this.quietAllowed ? NO_FIELDS : this.records.of(d)
    }
    return this.build(decisions)
  }

  private build(decisions: readonly Decision[]): Record<string, string> {
    const c = this.config
    const all = rateLimitHeaders(decisions, c.headers, c.legacyHeaders)
    if (c.headersOn === 'all' && c.refusalHeaders) return all
    // The families chosen: the quota fields on allowed and/or refused responses, the refusal's own.
    const refused = all['Retry-After'] !== undefined
    const quota = c.headersOn === 'all' || c.headersOn === (refused ? 'refused' : 'allowed')
    const chosen: Record<string, string> = {}
    for (const name in all) {
      const refusalField = name === 'Retry-After' || name === 'Cache-Control'
      if (refusalField ? c.refusalHeaders : quota) chosen[name] = all[name]!
    }
    return chosen
  }

  /** Status, content type and body of a refused request. */
  rejection(req: Req, decision: Decision): MaybePromise<Rejection> {
    const { message, statusCode } = this.config
    return this.body(req, decision, message, statusCode, this.rejections, refusalDetail)
  }

  /** Status, content type and body for a client on the deny list. */
  denial(req: Req, decision: Decision): MaybePromise<Rejection> {
    const { denyMessage, denyStatusCode } = this.config
    return this.body(req, decision, denyMessage, denyStatusCode, this.denials, denialDetail)
  }

  /** A refusal's body: the option's (a function's per request), or problem details rendered once per policy. */
  private body(
    req: Req,
    decision: Decision,
    message: LimiterOptions<Req>['message'],
    status: number,
    cache: Map<Policy, Rejection>,
    detail: (decision: Decision) => string,
  ): MaybePromise<Rejection> {
    if (typeof message === 'function') {
      const body = message(req, decision)
      return isThenable(body) ? body.then((b) => this.render(b, status)) : this.render(body, status)
    }
    let cached = cache.get(decision.policy)
    if (cached === undefined) {
      const problem = { type: 'about:blank', title: STATUS_TITLES[status] ?? 'Error', status, detail: detail(decision) }
      cached = this.render(message ?? problem, status, message === undefined)
      if (cache.size < MAX_CACHED_REJECTIONS) cache.set(decision.policy, cached)
    }
    return cached
  }

  /**
   * Arms the refund hook on the Node response: once it closes, its outcome decides whether the request
   * counts. A response cut off before it finished counts as failed. `res` is what `requestWasSuccessful`
   * receives (the framework's response object).
   */
  afterResponse(req: Req, res: unknown, raw: NodeResponseLike, decision: Decision): void {
    // The client may have left while the store answered: the response closed already and will not
    // close again, so it is over now, cut off (a concurrency slot would otherwise stay held for its window).
    if (raw.destroyed) this.complete(req, res, decision, 500)
    else raw.once('close', () => this.complete(req, res, decision, raw.writableFinished ? raw.statusCode : 500))
  }

  /**
   * Under algorithm "concurrency", releases the request's slot whatever the outcome (the refund of a
   * call held until released). Otherwise refunds the request when its outcome says it should not count,
   * and settles it to its actual cost (`actualCost`). Never throws.
   */
  complete(req: Req, res: unknown, decision: Decision, statusCode: number): void {
    const c = this.config
    if (!this.wantsCompletion || !decision.allowed) return
    if (this.releases) {
      void this.refund(decision)
      return
    }
    if (!c.skipFailedRequests && !c.skipSuccessfulRequests) {
      this.settling?.afterResponse(req, res, decision)
      return
    }
    const settle = (succeeded: boolean) => {
      if (succeeded ? c.skipSuccessfulRequests : c.skipFailedRequests) void this.refund(decision)
      else if (c.actualCost !== undefined) this.settling?.afterResponse(req, res, decision)
    }
    try {
      const verdict = c.requestWasSuccessful === undefined ? statusCode < 400 : c.requestWasSuccessful(req, res)
      if (isThenable(verdict))
        verdict.then(
          (v) => settle(v === true),
          (e) => this.onError('requestWasSuccessful', e),
        )
      else settle(verdict === true)
    } catch (error) {
      this.onError('requestWasSuccessful', error)
    }
  }

  private render(body: string | Record<string, unknown>, status: number, problem = false): Rejection {
    if (typeof body === 'string') return { status, contentType: 'text/plain; charset=utf-8', body, bytes: encode(body) }
    const json = JSON.stringify(body)
    return {
      status,
      contentType: problem ? 'application/problem+json' : 'application/json; charset=utf-8',
      body: json,
      bytes: encode(json),
    }
  }
}
