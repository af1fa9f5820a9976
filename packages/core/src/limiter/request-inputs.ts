import type { ClientList } from '../client-lists'
import { type Duration, parseDuration } from '../duration'
import { describeValue, TollgateError } from '../errors'
import { clientKey, ipKey, UNKNOWN_CLIENT_KEY } from '../keys'
import type { Config } from '../options/parse-options'
import { type AdapterHooks, type Decision, isThenable, type MaybePromise } from '../types'
import type { CallScope } from './call-parts'
import { type ScopeOptions, scopeOf } from './scope-options'

export type { ScopeOptions } from './scope-options'

/** Requests all diagnosed before diagnosing only one in DIAGNOSE_EVERY (a power of two). */
const DIAGNOSE_ALL = 1024
const DIAGNOSE_EVERY = 16

/**
 * What decides a request once its inputs are known (the limiter's counting): counts it by its client
 * key (as stored), max and cost, or refuses a client on the deny list without counting it.
 */
export interface RequestDecider {
  count(clientKey: string, max: number, cost: number, windowMs?: number, scope?: CallScope): MaybePromise<Decision>
  /** The decision for a client on the deny list: refused, counted nowhere. */
  deny(clientKey: string, max: number): Decision
  /** A request's keys when limits have keys of their own (CallParts.scope). */
  scope(clientKey: string, own: readonly (string | undefined)[], tag: string | undefined): CallScope
}

/**
 * A request's inputs: the skip, key, max and cost options called and their results validated, the
 * client IP keyed, and request-time misconfigurations logged once. Synchronous unless an option
 * function returns a promise.
 */
export class RequestInputs<Req> {
  private readonly warned = new Set<string>()
  private readonly windows = new Map<unknown, number>()
  private diagnosing: boolean
  /** The request's decision once `skip` let it through: by its one key, or by each limit's own (evaluateScoped). */
  private readonly evaluate: (req: Req) => MaybePromise<Decision | undefined>
  /** Requests diagnosed with nothing to say (see diagnose). */
  private undiagnosed = 0
  /**
   * The last client IP keyed, and its key: a keep-alive connection's requests carry the socket's one
   * address string, so a client's next request is keyed with one comparison.
   */
  private lastIp: string | undefined = undefined
  private lastKey = ''

  constructor(
    private readonly config: Config<Req>,
    private readonly hooks: AdapterHooks<Req>,
    private readonly decider: RequestDecider,
  ) {
    this.diagnosing = hooks.diagnose !== undefined
    // Decided once: a limiter without per-limit keys pays nothing per request for them.
    this.evaluate = config.limitKeys === undefined ? this.evaluateOne : this.evaluateScoped
  }

  /** The request's decision, or undefined when `skip` says so. */
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

  /** A key passed to the programmatic API, as stored. */
  keyOf(key: unknown): string {
    return clientKey(this.validKey('key', key))
  }

  /** A `max` passed to the programmatic API, or the limiter's own when it is a number, else `fallback`. */
  staticMax(max: number | undefined, fallback?: number): number {
    const limit = max ?? (typeof this.config.max === 'number' ? this.config.max : fallback)
    if (limit === undefined)
      throw new TollgateError("this call needs a max when the limiter's max is a function", 'TG_INVALID_REQUEST_VALUE')
    return this.validCount('max', limit)
  }

  validCount(name: string, value: unknown): number {
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value
    throw this.requestError(name, undefined, `returned ${describeValue(value)}, expected a whole number ≥ 0`)
  }

  /** An option function failed at request time: logged once per option, then handed to the adapter. */
  requestError(name: string, cause: unknown, problem?: string): TollgateError {
    if (cause instanceof TollgateError) return cause
    const what = problem ?? `threw ${cause instanceof Error ? cause.message : describeValue(cause)}`
    const error = new TollgateError(`Option "${name}" ${what}`, 'TG_INVALID_REQUEST_VALUE', { cause })
    if (!this.warned.has(`request:${name}`)) {
      this.warned.add(`request:${name}`)
      this.config.logger.error(`Tollgate: ${error.message}; such requests are answered by the framework's error handler`, cause)
    }
    return error
  }

  private evaluateOne(req: Req): MaybePromise<Decision | undefined> {
    const c = this.config
    const key = c.key === undefined ? this.ipKeyOf(req) : this.call('key', c.key, req)
    const max = typeof c.max === 'number' ? c.max : this.call('max', c.max, req)
    const cost = typeof c.cost === 'number' ? c.cost : this.call('cost', c.cost, req)
    const window = c.window === undefined ? undefined : this.call('window', c.window, req)
    if (isThenable(key) || isThenable(max) || isThenable(cost) || isThenable(window)) {
      return Promise.all([
        Promise.resolve(key).catch((e) => Promise.reject(this.requestError('key', e))),
        Promise.resolve(max).catch((e) => Promise.reject(this.requestError('max', e))),
        Promise.resolve(cost).catch((e) => Promise.reject(this.requestError('cost', e))),
        Promise.resolve(window).catch((e) => Promise.reject(this.requestError('window', e))),
      ]).then(([k, m, n, w]) =>
        this.admit(
          req,
          this.keyOf(k),
          this.validCount('max', m),
          this.validCount('cost', n),
          w === undefined ? undefined : this.windowMsOf(w),
        ),
      )
    }
    return this.admit(
      req,
      c.key === undefined ? key : this.keyOf(key),
      max === c.max ? max : this.validCount('max', max),
      cost === c.cost ? cost : this.validCount('cost', cost),
      window === undefined ? undefined : this.windowMsOf(window),
    )
  }

  /**
   * A request of a limiter whose limits have keys of their own: its client key, cost, each limit's own
   * key and the hash tag, called and checked as `key` is (a throw or a bad value is a request error
   * naming the option, e.g. `limits[1].key`), then one count over all of them.
   */
  private evaluateScoped(req: Req): MaybePromise<Decision | undefined> {
    const c = this.config
    const limitKeys = c.limitKeys!
    const names: string[] = ['key', 'cost', 'hashTag']
    const inputs: unknown[] = [
      c.key === undefined ? this.ipKeyOf(req) : this.call('key', c.key, req),
      typeof c.cost === 'number' ? c.cost : this.call('cost', c.cost, req),
      c.hashTag === undefined ? undefined : this.call('hashTag', c.hashTag, req),
    ]
    for (let i = 0; i < limitKeys.length; i++) {
      const fn = limitKeys[i]
      names.push(`limits[${i}].key`)
      inputs.push(fn === undefined ? undefined : this.call(`limits[${i}].key`, fn, req))
    }
    const decide = (values: readonly unknown[]): MaybePromise<Decision | undefined> => {
      const key = c.key === undefined ? (values[0] as string) : this.keyOf(values[0])
      const cost = values[1] === c.cost ? (values[1] as number) : this.validCount('cost', values[1])
      const tag = c.hashTag === undefined ? undefined : clientKey(this.validKey('hashTag', values[2]))
      const own = limitKeys.map((fn, i) => (fn === undefined ? undefined : clientKey(this.validKey(`limits[${i}].key`, values[3 + i]))))
      const max = typeof c.max === 'number' ? c.max : 0
      return this.admit(req, key, max, cost, undefined, this.decider.scope(key, own, tag))
    }
    if (!inputs.some((v) => isThenable(v))) return decide(inputs)
    return Promise.all(inputs.map((v, i) => Promise.resolve(v).catch((e) => Promise.reject(this.requestError(names[i]!, e))))).then(decide)
  }

  /** The keys of a `consume`, `peek` or `reset` call, undefined for a limiter whose limits have no keys of their own (scope-options.ts). */
  scopeOf(callKey: string, options: ScopeOptions | undefined, partial = false): { scope?: CallScope; only?: number[] } {
    return scopeOf(this.config, this.decider, callKey, options, partial)
  }

  /** A window a `window` function returned, in ms (parsed once per distinct value). */
  private windowMsOf(value: unknown): number {
    let ms = this.windows.get(value)
    if (ms === undefined) {
      try {
        ms = parseDuration('window', value as Duration)
      } catch {
        throw this.requestError(
          'window',
          undefined,
          `returned ${describeValue(value)}, expected a duration such as "1s" or a whole number of ms`,
        )
      }
      if (this.windows.size < 256) this.windows.set(value, ms)
    }
    return ms
  }

  /** Counts the request, unless its client is on the deny list (refused) or the allow list (let through). */
  private admit(
    req: Req,
    key: string,
    max: number,
    cost: number,
    windowMs: number | undefined,
    scope?: CallScope,
  ): MaybePromise<Decision | undefined> {
    const { allowList, denyList } = this.config
    if (allowList === undefined && denyList === undefined) return this.decider.count(key, max, cost, windowMs, scope)
    const ip = this.hooks.ip(req)
    const denied = denyList === undefined ? false : this.listed('denyList', denyList, req, ip, key)
    const then = (isDenied: boolean): MaybePromise<Decision | undefined> => {
      if (isDenied) return this.decider.deny(key, max)
      const allowed = allowList === undefined ? false : this.listed('allowList', allowList, req, ip, key)
      if (isThenable(allowed)) return allowed.then((a) => (a ? undefined : this.decider.count(key, max, cost, windowMs, scope)))
      return allowed ? undefined : this.decider.count(key, max, cost, windowMs, scope)
    }
    return isThenable(denied) ? denied.then(then) : then(denied)
  }

  private listed(
    name: string,
    list: ClientList | ((req: Req) => MaybePromise<boolean>),
    req: Req,
    ip: string | undefined,
    key: string,
  ): MaybePromise<boolean> {
    if (typeof list !== 'function') return list.matches(ip ?? undefined, key)
    const answer = this.call(name, list, req)
    return isThenable(answer)
      ? answer.then(
          (a) => a === true,
          (e) => Promise.reject(this.requestError(name, e)),
        )
      : answer === true
  }

  private ipKeyOf(req: Req): string {
    const ip = this.hooks.ip(req)
    if (typeof ip === 'string' && ip === this.lastIp) return this.lastKey
    const key = ipKey(ip, this.config.ipv6Subnet)
    if (key !== undefined) {
      this.lastIp = ip as string
      this.lastKey = key
      return key
    }
    this.warnOnce(
      'no-ip',
      `Tollgate: could not resolve the client IP of a request (got ${describeValue(ip)}). Such requests share one bucket, "${UNKNOWN_CLIENT_KEY}". ${this.hooks.noIpAdvice ?? "Behind a proxy, set the framework's trust-proxy setting; or pass a key() option."}`,
    )
    return UNKNOWN_CLIENT_KEY
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

  private warnOnce(id: string, message: string): void {
    if (this.warned.has(id)) return
    this.warned.add(id)
    this.config.logger.warn(message)
  }

  /**
   * Looks for a request-time misconfiguration (the adapter's diagnose hook) until a request settles
   * it. While requests say nothing either way (no proxy header yet), every one of the first
   * DIAGNOSE_ALL requests is looked at, then one in DIAGNOSE_EVERY: a setup that shows on some
   * requests only (a client writing its own X-Forwarded-For) is still found, at a fraction of the cost.
   */
  private diagnose(req: Req): void {
    const n = ++this.undiagnosed
    if (n > DIAGNOSE_ALL && (n & (DIAGNOSE_EVERY - 1)) !== 0) return
    const problem = this.hooks.diagnose?.(req)
    if (problem === undefined) return
    this.diagnosing = false
    if (problem !== null) this.warnOnce('diagnose', `Tollgate: ${problem}`)
  }
}
