import { createHash } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { STATUS_CODES } from 'node:http'
import { type ConsumeCall, type ConsumeResult, decisionOf, type LimitSpec, makeLimit, pickDecision } from './algorithms'
import { describeDuration } from './duration'
import { describeValue, TollgateError } from './errors'
import { rateLimitHeaders } from './headers'
import { ipKey } from './ip'
import { MemoryStore } from './memory-store'
import { type Config, parseOptions } from './options'
import type { MaybePromise } from './store'
import type { Decision, DecisionSource, LimiterOptions } from './types'

/** What an adapter tells the core about its framework's requests. */
export interface AdapterHooks<Req> {
  /** The client IP as the framework resolved it (honouring its trust-proxy setting). */
  ip(req: Req): string | undefined
  /**
   * A misconfiguration visible only at request time, e.g. a proxy header the framework does not trust:
   * a message (warned once, then no more checks), `undefined` (nothing seen yet, ask again), or `null`
   * (the setup is known to be fine: stop asking, so healthy servers pay nothing per request).
   */
  diagnose?(req: Req): string | null | undefined
}

/** The body of a refused request, ready to send. */
export interface Rejection {
  status: number
  contentType: string
  body: string
}

/** Key of the shared bucket for requests whose client IP cannot be resolved (see README, "Keys"). */
export const UNKNOWN_CLIENT_KEY = 'unknown-ip'
/** Longer client keys are replaced by a hash, so a key function cannot blow up store keys. */
export const MAX_KEY_LENGTH = 200
/** After a store failure, requests go straight to the failure policy for this long before Redis is tried again. */
const STORE_RETRY_MS = 1000
/**
 * Property where `firstVisit` marks a request. Exported so an adapter can declare it up front (fastify's
 * decorateRequest): adding an undeclared property to every request changes its object shape.
 */
export const VISITED = Symbol('tollgate.visitedBy')
const visitedBy = VISITED
type Visited = { [visitedBy]?: object | object[] }

/**
 * True the first time `limiter` meets this request object: an adapter whose middleware can be
 * mounted twice on one request path (app and router, a HEAD twin's hooks) still counts it once.
 */
export function firstVisit(request: object, limiter: object): boolean {
  const r = request as Visited
  const seen = r[visitedBy]
  if (seen === undefined) r[visitedBy] = limiter
  else if (seen === limiter) return false
  else if (!Array.isArray(seen)) r[visitedBy] = [seen, limiter]
  else if (seen.includes(limiter)) return false
  else seen.push(limiter)
  return true
}

/** Prefixes in use per store in this process, to warn when two limiters would count into the same keys. */
const prefixesInUse = new WeakMap<object, Set<string>>()
/** Dynamic `max` values whose policy strings are kept rendered. */
const MAX_CACHED_POLICIES = 256
/** Store keys kept built, per limiter; the memo starts over when it reaches this size. */
const MAX_CACHED_STORE_KEYS = 16384

export function isThenable<T>(value: MaybePromise<T>): value is Promise<T> {
  return typeof (value as Promise<T> | undefined)?.then === 'function'
}

/**
 * One limit: options parsed once, then `check(req)` per request. Framework-free: adapters pass their
 * request objects and read the client IP through `hooks`.
 *
 * Events: `storeError` (error) for every failed store call, `fallback` (decision) for each decision the
 * local fallback made while the store was unavailable, `recover` when the store answers again,
 * `limited` (decision) for each refusal (also in shadow mode).
 */
export class Limiter<Req = unknown> extends EventEmitter {
  readonly config: Config<Req>
  private readonly hooks: AdapterHooks<Req>
  private readonly singleLimits = new Map<number, LimitSpec>()
  /**
   * Store keys by client key. A client's requests then share one key string, whose hash V8 keeps:
   * building and hashing a fresh prefix+{key} per request was ~40% of the memory store's time.
   */
  private storeKeys = new Map<string, string>()
  /** Single-limit fixed window: the batched INCRBY path with the over-limit cache. */
  private readonly fast: boolean
  /** Refunds are on: remember each admitted call so it can be undone after the response. */
  private readonly refunds: boolean
  private readonly calls = new WeakMap<Decision, ConsumeCall>()
  private sequence = 0
  private readonly instance = Math.random().toString(36).slice(2, 10)
  private readonly rejections = new Map<Decision['policy'], Rejection>()
  /**
   * Clients already over the limit in window `overWindow`, with the count the store last returned.
   * Keyed by client key, not store key: the prefix is this limiter's own, so the two are one to one,
   * and a flood of refusals then never builds a store key string.
   */
  private readonly over = new Map<string, number>()
  private overWindow = -1
  private fallback: MemoryStore | undefined
  private storeDownUntil = 0
  private degraded = false
  private readonly warned = new Set<string>()
  private diagnosing: boolean

  constructor(options?: LimiterOptions<Req>, hooks?: AdapterHooks<Req>, adapterKeys: readonly string[] = []) {
    super()
    this.config = parseOptions(options, adapterKeys)
    this.hooks = hooks ?? { ip: () => undefined }
    this.diagnosing = this.hooks.diagnose !== undefined
    this.fast = this.config.algorithm === 'fixed-window' && this.config.limits === undefined
    this.refunds = this.config.skipFailedRequests || this.config.skipSuccessfulRequests
    const { store, prefix, logger } = this.config
    let prefixes = prefixesInUse.get(store)
    if (prefixes === undefined) {
      prefixes = new Set()
      prefixesInUse.set(store, prefixes)
    }
    if (prefixes.has(prefix)) {
      // Two limits counting into one key add up each other's requests: each would refuse early.
      logger.warn(
        `Tollgate: two limiters share the prefix "${prefix}" on one store, so their counts add up; give each limiter its own prefix option`,
      )
    }
    prefixes.add(prefix)
  }

  /**
   * Counts one request and decides. Returns `undefined` when `skip` says so. Synchronous with the
   * memory store and plain options; a promise when a store or an option function is asynchronous.
   * Throws (or rejects with) a TollgateError when an option function throws or returns a bad value:
   * adapters hand that to the framework's error handling, so the request gets a definite answer.
   */
  check(req: Req): MaybePromise<Decision | undefined> {
    if (this.diagnosing) this.diagnose(req)
    const skip = this.config.skip
    if (skip !== undefined) {
      const skipped = this.call('skip', skip, req)
      if (isThenable(skipped)) {
        return skipped.then(
          (s) => (s === true ? undefined : this.evaluate(req)),
          (e) => Promise.reject(this.requestError('skip', e)),
        )
      }
      if (skipped === true) return undefined
    }
    return this.evaluate(req)
  }

  /**
   * Counts `cost` units against `key` outside HTTP (queues, GraphQL resolvers). `key` is used as the
   * client key as it is (hashed when longer than MAX_KEY_LENGTH). `max` is needed only when the
   * limiter's `max` is a function.
   */
  consume(key: string, cost = 1, max?: number): MaybePromise<Decision> {
    return this.count(this.clientKey(this.validKey('key', key)), this.staticMax(max), this.validCount('cost', cost))
  }

  /** What `key` has used so far, without counting anything (a request of cost 0). */
  peek(key: string, max?: number): MaybePromise<Decision> {
    const clientKey = this.clientKey(this.validKey('key', key))
    const limit = this.staticMax(max)
    if (!this.fast) return this.count(clientKey, limit, 0)
    const c = this.config
    const now = c.clock()
    const counted = c.store.get(this.storeKey(clientKey), c.windowMs, now)
    return isThenable(counted)
      ? counted.then((n) => this.decide(clientKey, n, limit, 0, now, 'store'))
      : this.decide(clientKey, counted, limit, 0, now, 'store')
  }

  /** Forgets everything counted for `key` (in the current window, for the window algorithms). */
  reset(key: string): MaybePromise<void> {
    const c = this.config
    const clientKey = this.clientKey(this.validKey('key', key))
    const base = this.storeKey(clientKey)
    this.over.delete(clientKey)
    const now = c.clock()
    if (this.fast) return c.store.reset(base, c.windowMs, now)
    return c.store.forget(this.callFor(base, this.limitsFor(this.staticMax(undefined, 0)), 0, now))
  }

  /**
   * Called by adapters once the response is done, for `skipFailedRequests`/`skipSuccessfulRequests`:
   * refunds the request when its outcome says it should not count. Never throws.
   */
  complete(req: Req, res: unknown, decision: Decision, statusCode: number): void {
    if (!this.refunds || !decision.allowed) return
    const c = this.config
    const settle = (succeeded: boolean) => {
      if (succeeded ? c.skipSuccessfulRequests : c.skipFailedRequests) void this.refund(decision)
    }
    try {
      const verdict = c.requestWasSuccessful === undefined ? statusCode < 400 : c.requestWasSuccessful(req, res)
      if (isThenable(verdict))
        verdict.then(
          (v) => settle(v === true),
          (e) => this.requestError('requestWasSuccessful', e),
        )
      else settle(verdict === true)
    } catch (error) {
      this.requestError('requestWasSuccessful', error)
    }
  }

  /** Undoes an admitted decision, within its own window only and never below zero. */
  async refund(decision: Decision): Promise<void> {
    const call = this.calls.get(decision)
    if (call === undefined || !decision.allowed || decision.shadowed) return
    this.calls.delete(decision)
    try {
      await (decision.source === 'fallback' ? this.fallback?.refund(call) : this.config.store.refund(call))
    } catch (error) {
      this.emit('storeError', error)
    }
  }

  /** True when adapters must report each response's outcome through `complete()` (refund options). */
  get wantsCompletion(): boolean {
    return this.refunds
  }

  /** The header record for the decisions made on one request, in this limiter's header style. */
  headers(decisions: readonly Decision[]): Record<string, string> {
    return rateLimitHeaders(decisions, this.config.headers, this.config.legacyHeaders)
  }

  /** Status, content type and body of a refused request. */
  rejection(req: Req, decision: Decision): MaybePromise<Rejection> {
    const { message, statusCode } = this.config
    if (typeof message === 'function') {
      const body = message(req, decision)
      return isThenable(body) ? body.then((b) => this.render(b)) : this.render(body)
    }
    let cached = this.rejections.get(decision.policy)
    if (cached === undefined) {
      cached = this.render(
        message ?? {
          type: 'about:blank',
          title: STATUS_CODES[statusCode] ?? 'Too Many Requests',
          status: statusCode,
          detail: `Too many requests: the limit is ${decision.limit} per ${describeDuration(decision.policy.windowMs)}. Retry after the number of seconds in the Retry-After header.`,
        },
        message === undefined,
      )
      if (this.rejections.size < MAX_CACHED_POLICIES) this.rejections.set(decision.policy, cached)
    }
    return cached
  }

  private render(body: string | Record<string, unknown>, problem = false): Rejection {
    if (typeof body === 'string') return { status: this.config.statusCode, contentType: 'text/plain; charset=utf-8', body }
    return {
      status: this.config.statusCode,
      contentType: problem ? 'application/problem+json' : 'application/json; charset=utf-8',
      body: JSON.stringify(body),
    }
  }

  private evaluate(req: Req): MaybePromise<Decision> {
    const c = this.config
    const key = c.key === undefined ? this.ipKeyOf(req) : this.call('key', c.key, req)
    const max = typeof c.max === 'number' ? c.max : this.call('max', c.max, req)
    const cost = typeof c.cost === 'number' ? c.cost : this.call('cost', c.cost, req)
    if (isThenable(key) || isThenable(max) || isThenable(cost)) {
      return Promise.all([
        Promise.resolve(key).catch((e) => Promise.reject(this.requestError('key', e))),
        Promise.resolve(max).catch((e) => Promise.reject(this.requestError('max', e))),
        Promise.resolve(cost).catch((e) => Promise.reject(this.requestError('cost', e))),
      ]).then(([k, m, n]) => this.count(this.clientKey(this.validKey('key', k)), this.validCount('max', m), this.validCount('cost', n)))
    }
    return this.count(
      c.key === undefined ? key : this.clientKey(this.validKey('key', key)),
      max === c.max ? max : this.validCount('max', max),
      cost === c.cost ? cost : this.validCount('cost', cost),
    )
  }

  /** The atomic count and the decision from it; the store's returned count is the only input. */
  private count(clientKey: string, max: number, cost: number): MaybePromise<Decision> {
    const c = this.config
    const now = c.clock()
    if (!this.fast) return this.consumeCall(this.callFor(this.storeKey(clientKey), this.limitsFor(max), cost, now), clientKey)
    if (c.store.local) {
      const base = this.storeKey(clientKey)
      const counted = c.store.increment(base, cost, c.windowMs, now)
      if (!isThenable(counted)) return this.decide(clientKey, counted, max, cost, now, 'store', base)
      return counted.then((n) => this.decide(clientKey, n, max, cost, now, 'store', base))
    }

    const index = Math.floor(now / c.windowMs)
    if (index !== this.overWindow) {
      // A new window: every "over" verdict of the last one is void.
      if (this.over.size > 0) this.over.clear()
      this.overWindow = index
    }
    // Within one fixed window a count only grows, so a client seen over the limit stays over it
    // until the window ends: answer without a round trip.
    // (Off with refunds: a refund elsewhere can bring a count back under the limit.)
    const known = this.refunds ? undefined : this.over.get(clientKey)
    if (known !== undefined && known + cost > max) return this.decide(clientKey, known + cost, max, cost, now, 'cache')

    const base = this.storeKey(clientKey)
    if (now < this.storeDownUntil) return this.onStoreError(undefined, base, clientKey, max, cost, now)
    let counted: MaybePromise<number>
    try {
      counted = c.store.increment(base, cost, c.windowMs, now)
    } catch (error) {
      return this.onStoreError(error, base, clientKey, max, cost, now)
    }
    if (!isThenable(counted)) return this.fromStore(base, clientKey, counted, max, cost, now, index)
    return counted.then(
      (n) => this.fromStore(base, clientKey, n, max, cost, now, index),
      (error) => this.onStoreError(error, base, clientKey, max, cost, now),
    )
  }

  private storeKey(clientKey: string): string {
    let key = this.storeKeys.get(clientKey)
    if (key === undefined) {
      if (this.storeKeys.size >= MAX_CACHED_STORE_KEYS) this.storeKeys = new Map()
      key = `${this.config.prefix}{${clientKey}}`
      this.storeKeys.set(clientKey, key)
    }
    return key
  }

  private fromStore(base: string, clientKey: string, count: number, max: number, cost: number, now: number, index: number): Decision {
    if (this.degraded) this.recovered()
    // Only cache a verdict for the window it was made in; a reply can arrive after the edge.
    if (count > max && index === this.overWindow && !this.refunds) this.over.set(clientKey, count)
    return this.decide(clientKey, count, max, cost, now, 'store', base)
  }

  /** Every algorithm but the single-limit fixed window: one atomic store call for all limits. */
  private consumeCall(call: ConsumeCall, clientKey: string): MaybePromise<Decision> {
    const store = this.config.store
    if (!store.local && call.now < this.storeDownUntil) return this.consumeFailed(undefined, call, clientKey)
    let result: MaybePromise<ConsumeResult>
    try {
      result = store.consume(call)
    } catch (error) {
      return this.consumeFailed(error, call, clientKey)
    }
    if (!isThenable(result)) return this.fromConsume(call, result, clientKey, 'store')
    return result.then(
      (r) => {
        if (this.degraded) this.recovered()
        return this.fromConsume(call, r, clientKey, 'store')
      },
      (error) => this.consumeFailed(error, call, clientKey),
    )
  }

  private fromConsume(call: ConsumeCall, result: ConsumeResult, clientKey: string, source: Decision['source']): Decision {
    let decision: Decision
    if (call.limits.length === 1) decision = decisionOf(call, result, 0, clientKey, source)
    else {
      const all = call.limits.map((_, i) => decisionOf(call, result, i, clientKey, source))
      decision = { ...pickDecision(all), limits: all }
    }
    decision.cost = call.cost
    if (this.refunds && decision.allowed) this.calls.set(decision, call)
    return this.finish(decision)
  }

  private consumeFailed(error: unknown, call: ConsumeCall, clientKey: string): Decision {
    const c = this.config
    if (error !== undefined) this.storeFailed(error, call.now)
    if (c.onStoreError === 'fallback') {
      this.fallback ??= new MemoryStore()
      const decision = this.fromConsume(call, this.fallback.consume(call), clientKey, 'fallback')
      this.emit('fallback', decision)
      return decision
    }
    const allowed = c.onStoreError === 'allow'
    const values: number[] = []
    for (const limit of call.limits) {
      // Numbers that make decisionOf report a full (allow) or an exhausted (deny) quota.
      if (call.algorithm === 'gcra') values.push(call.now, allowed ? call.now : call.now + limit.windowMs * 2)
      else if (call.algorithm === 'sliding-log') values.push(allowed ? 0 : limit.max, call.now)
      else values.push(allowed ? 0 : limit.max, allowed ? 0 : limit.max)
    }
    return this.fromConsume(call, { allowed, values }, clientKey, c.onStoreError)
  }

  private callFor(base: string, limits: readonly LimitSpec[], cost: number, now: number): ConsumeCall {
    this.sequence = (this.sequence + 1) % 1e9
    return {
      algorithm: this.config.algorithm,
      base,
      limits,
      cost,
      now,
      id: `${this.instance}:${this.sequence}`,
    }
  }

  private limitsFor(max: number): readonly LimitSpec[] {
    return this.config.limits ?? [this.limitFor(max)]
  }

  private staticMax(max: number | undefined, fallback?: number): number {
    const limit = max ?? (typeof this.config.max === 'number' ? this.config.max : fallback)
    if (limit === undefined)
      throw new TollgateError("this call needs a max when the limiter's max is a function", 'TG_INVALID_REQUEST_VALUE')
    return this.validCount('max', limit)
  }

  private finish(decision: Decision): Decision {
    if (!decision.allowed) {
      this.emit('limited', decision)
      if (this.config.shadow) {
        // Shadow mode: the verdict is reported (headers, events) but never enforced.
        decision.allowed = true
        decision.shadowed = true
        decision.retryAfterMs = 0
      }
    }
    return decision
  }

  private storeFailed(error: unknown, now: number): void {
    const c = this.config
    this.storeDownUntil = now + STORE_RETRY_MS
    if (!this.degraded) {
      this.degraded = true
      c.logger.error(
        `Tollgate: the store failed (${error instanceof Error ? error.message : describeValue(error)}); applying onStoreError "${c.onStoreError}" until it answers again`,
        error,
      )
    }
    this.emit('storeError', error)
  }

  private onStoreError(error: unknown, base: string, clientKey: string, max: number, cost: number, now: number): Decision {
    const c = this.config
    if (error !== undefined) this.storeFailed(error, now)
    if (c.onStoreError === 'fallback') {
      this.fallback ??= new MemoryStore()
      const decision = this.decide(clientKey, this.fallback.increment(base, cost, c.windowMs, now), max, cost, now, 'fallback', base)
      this.emit('fallback', decision)
      return decision
    }
    const allowed = c.onStoreError === 'allow'
    return this.decide(clientKey, allowed ? 0 : max + Math.max(cost, 1), max, cost, now, c.onStoreError)
  }

  private recovered(): void {
    this.degraded = false
    this.storeDownUntil = 0
    this.config.logger.warn('Tollgate: the store is answering again; decisions come from it again')
    this.emit('recover')
  }

  private decide(
    clientKey: string,
    count: number,
    max: number,
    cost: number,
    now: number,
    source: DecisionSource,
    base?: string,
  ): Decision {
    const windowMs = this.config.windowMs
    const resetAt = (Math.floor(now / windowMs) + 1) * windowMs
    const allowed = count <= max
    const decision: Decision = {
      allowed,
      limit: max,
      remaining: allowed ? max - count : 0,
      count,
      resetAt,
      retryAfterMs: allowed ? 0 : resetAt - now,
      at: now,
      key: clientKey,
      policy: this.limitFor(max).policy,
      source,
      cost,
    }
    if (this.refunds && allowed && base !== undefined) {
      const call = this.callFor(base, [this.limitFor(max)], cost, now)
      this.calls.set(decision, call)
    }
    return allowed && !this.config.shadow ? decision : this.finish(decision)
  }

  private limitFor(max: number): LimitSpec {
    let limit = this.singleLimits.get(max)
    if (limit === undefined) {
      const { windowMs, name, burst } = this.config
      limit = makeLimit(max, windowMs, burst, name)
      if (this.singleLimits.size < MAX_CACHED_POLICIES) this.singleLimits.set(max, limit)
    }
    return limit
  }

  private ipKeyOf(req: Req): string {
    const ip = this.hooks.ip(req)
    const key = ipKey(ip, this.config.ipv6Subnet)
    if (key !== undefined) return key
    this.warnOnce(
      'no-ip',
      `Tollgate: could not resolve the client IP of a request (got ${describeValue(ip)}). Such requests share one bucket, "${UNKNOWN_CLIENT_KEY}". Behind a proxy, set the framework's trust-proxy setting; or pass a key() option.`,
    )
    return UNKNOWN_CLIENT_KEY
  }

  private clientKey(key: string): string {
    if (key.length <= MAX_KEY_LENGTH) return key
    return `#${createHash('sha256').update(key).digest('base64url')}`
  }

  private call<T>(name: string, fn: (req: Req) => MaybePromise<T>, req: Req): MaybePromise<T> {
    try {
      return fn(req)
    } catch (error) {
      throw this.requestError(name, error)
    }
  }

  private validKey(name: string, value: unknown): string {
    if (typeof value === 'string' && value.length > 0) return value
    throw this.requestError(name, undefined, `returned ${describeValue(value)}, expected a non-empty string`)
  }

  private validCount(name: string, value: unknown): number {
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value
    throw this.requestError(name, undefined, `returned ${describeValue(value)}, expected a whole number ≥ 0`)
  }

  /** An option function failed at request time: logged once per option, then handed to the adapter. */
  private requestError(name: string, cause: unknown, problem?: string): TollgateError {
    if (cause instanceof TollgateError) return cause
    const what = problem ?? `threw ${cause instanceof Error ? cause.message : describeValue(cause)}`
    const error = new TollgateError(`Option "${name}" ${what}`, 'TG_INVALID_REQUEST_VALUE', { cause })
    if (!this.warned.has(`request:${name}`)) {
      this.warned.add(`request:${name}`)
      this.config.logger.error(`Tollgate: ${error.message}; such requests are answered by the framework's error handler`, cause)
    }
    return error
  }

  private warnOnce(id: string, message: string): void {
    if (this.warned.has(id)) return
    this.warned.add(id)
    this.config.logger.warn(message)
  }

  private diagnose(req: Req): void {
    const problem = this.hooks.diagnose?.(req)
    if (problem === undefined) return
    this.diagnosing = false
    if (problem !== null) this.warnOnce('diagnose', `Tollgate: ${problem}`)
  }
}
