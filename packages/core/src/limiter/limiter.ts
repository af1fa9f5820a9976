import type { LimiterOptions } from '../options/limiter-options'
import { type Config, parseOptions } from '../options/parse-options'
import { algorithmOf, KIT, notRegistered } from '../registry'
import { MemoryStore } from '../stores/memory-store'
import type { AdapterHooks, Decision, MaybePromise } from '../types'
import type { CallScope } from './call-parts'
import { Counting } from './counting'
import { Emitter } from './emitter'
import { LocalFailures } from './failures'
import type { RemoteKit } from './remote'
import { DecisionEvents, type Telemetry, type TelemetryMaker } from './reporting'
import { RequestInputs, type ScopeOptions } from './request-inputs'
import { type NodeResponseLike, type Rejection, ResponseParts } from './response'
import type { Waiting, WaitOptions, waitArguments } from './waiting'

/** What `wait()` reads of the waiting feature's slot (features.ts writes it, checked against this). */
export interface WaitingKit {
  readonly Waiting: typeof Waiting
  readonly args: typeof waitArguments
}

/** Prefixes in use per store in this process, to warn when two limiters would count into the same keys. */
const prefixesInUse = new WeakMap<object, Set<string>>()

/**
 * One limit: options parsed once, then `check(req)` per request. Framework-free: adapters pass their
 * request objects and read the client IP through `hooks`. The work is split by concern: request
 * inputs (request-inputs.ts), the one counting path (counting.ts), the failure policy
 * (resilience.ts) and what a decision looks like on the wire (response.ts).
 *
 * Events: `storeError` (error) for every failed store call, `fallback` (decision) for each decision the
 * local fallback made while the store was unavailable, `recover` when the store answers again,
 * `limited` (decision) for each refusal (also in shadow mode), `decision` (decision) for every decision
 * of `check` and `consume` (free while nothing listens: telemetry.ts).
 */
export class Limiter<Req = unknown> extends Emitter {
  readonly config: Config<Req>
  private readonly inputs: RequestInputs<Req>
  private readonly counting: Counting<Req>
  private readonly response: ResponseParts<Req>
  private readonly telemetry: Telemetry
  /** The queues of `wait`, made by its first call: a limiter that never waits carries nothing for it. */
  private waiting: Waiting | undefined
  /** Algorithm "concurrency": an admitted request holds its slot until released. */
  private readonly releases: boolean

  constructor(options?: LimiterOptions<Req>, hooks?: AdapterHooks<Req>, adapterKeys: readonly string[] = []) {
    super()
    this.config = parseOptions(options, adapterKeys, (logger) => new MemoryStore({ logger }))
    const algorithm = algorithmOf(this.config.algorithm)
    this.releases = algorithm.releases === true
    const emit = (event: string, value?: unknown) => void this.emit(event, value)
    const remote = KIT.remote as RemoteKit | undefined
    const local = this.config.store.local === true
    if (!local && remote === undefined) throw notRegistered('store', 'a store outside this process', 'remoteStores')
    const resilience = local
      ? new LocalFailures(this.config as Config<unknown>, emit)
      : new remote!.Resilience(this.config as Config<unknown>, emit)
    this.telemetry = new ((KIT.Telemetry as TelemetryMaker | undefined) ?? DecisionEvents)(
      this.config as Config<unknown>,
      emit,
      () => resilience.downNodes,
    )
    this.counting = new Counting(this.config, algorithm, resilience, this.telemetry, emit)
    this.inputs = new RequestInputs(this.config, hooks ?? { ip: () => undefined }, this.counting)
    this.response = new ResponseParts(
      this.config,
      (name, error) => this.inputs.requestError(name, error),
      (decision) => this.refund(decision),
      this.counting.settling,
    )
    warnOnSharedPrefix(this.config)
  }

  /**
   * Gives back the quota this process holds under the `lease` option (its unspent slices) and stops
   * its idle timer. Call it when the process stops serving (it does nothing without `lease`); the
   * limiter still works after it, leasing again as requests come.
   */
  close(): Promise<void> {
    return this.counting.close()
  }

  /**
   * Counts one request and decides. Returns `undefined` when `skip` says so. Synchronous with the
   * memory store and plain options; a promise when a store or an option function is asynchronous.
   * Throws (or rejects with) a TollgateError when an option function throws or returns a bad value:
   * adapters hand that to the framework's error handling, so the request gets a definite answer.
   */
  check(req: Req): MaybePromise<Decision | undefined> {
    return this.inputs.check(req)
  }

  /**
   * Counts `cost` units against `key` outside HTTP (queues, GraphQL resolvers). `key` is used as the
   * client key as it is (hashed when longer than MAX_KEY_LENGTH). `max` is needed only when the
   * limiter's `max` is a function. With limits that have keys of their own, pass an options object
   * instead: `consume(key, { cost, keys: [undefined, 'tenant:acme'], hashTag })` (ConsumeOptions).
   */
  consume(key: string, cost?: number, max?: number): MaybePromise<Decision>
  consume(key: string, options: ConsumeOptions): MaybePromise<Decision>
  consume(key: string, costOrOptions: number | ConsumeOptions = 1, max?: number): MaybePromise<Decision> {
    const inputs = this.inputs
    if (typeof costOrOptions !== 'object' || costOrOptions === null) {
      if (this.config.limitKeys === undefined)
        return this.counting.count(inputs.keyOf(key), inputs.staticMax(max), inputs.validCount('cost', costOrOptions))
      costOrOptions = { cost: costOrOptions, ...(max === undefined ? {} : { max }) }
    }
    const t = this.target(key, costOrOptions)
    return this.counting.count(t.clientKey, t.max, inputs.validCount('cost', costOrOptions.cost ?? 1), undefined, t.scope)
  }

  /**
   * What `key` has left, counting nothing and emitting nothing: whether one more unit would be
   * admitted now (`allowed`), `remaining`, `count` (units used, at most the limit), and when it resets.
   * The same for every algorithm, and for `max` and `limits`. With limits that have keys of their
   * own, pass them as `consume` takes them: `peek(key, { keys, hashTag })`.
   */
  peek(key: string, max?: number): MaybePromise<Decision>
  peek(key: string, options: PeekOptions): MaybePromise<Decision>
  peek(key: string, maxOrOptions?: number | PeekOptions): MaybePromise<Decision> {
    const t = this.target(key, typeof maxOrOptions === 'object' && maxOrOptions !== null ? maxOrOptions : { max: maxOrOptions })
    return this.counting.peek(t.clientKey, t.max, t.scope)
  }

  /**
   * Forgets everything counted for `key` (in the current window, for the window algorithms). With
   * limits that have keys of their own, it forgets the limits counted under `key`, and those whose
   * keys `options.keys` names (a tenant's count is shared: it is forgotten only when named).
   */
  reset(key: string, options?: ScopeOptions): MaybePromise<void> {
    const t = this.target(key, options, true)
    return this.counting.forget(t.clientKey, t.max, t.scope, t.only)
  }

  /**
   * Counts `cost` units against `key` as soon as the limit admits them, waiting up to `maxWaitMs`:
   * resolves to the admitted decision, or to a refused one when the time is up or `signal` aborts
   * (an already-aborted signal resolves at once, counting nothing). Waiters on one key are served
   * first come, first served in this process; only the first of them tries, with an ordinary
   * `consume` (same events, same failure policy), and after a refusal it sleeps for the refusal's
   * `retryAfterMs` before trying again. Rejects with a TollgateError naming a bad argument.
   */
  wait(key: string, options: WaitOptions): Promise<Decision> {
    const waiting = KIT.waiting as WaitingKit | undefined
    if (waiting === undefined) return Promise.reject(notRegistered('wait', 'limiter.wait()', 'waiting'))
    let args: ReturnType<typeof waiting.args>
    let t: Target
    try {
      args = waiting.args(key, options)
      t = this.target(key, { ...args.scope, max: args.max })
    } catch (error) {
      return Promise.reject(error)
    }
    this.waiting ??= new waiting.Waiting(this.config as Config<unknown>, {
      count: (k, cost, m, s) => this.counting.count(k, m, cost, undefined, s),
      limitsOf: (m) => this.counting.limitsOf(m),
      refund: (decision) => this.refund(decision),
    })
    return this.waiting.wait(t.clientKey, t.scope, args.cost, t.max, args.maxWaitMs, args.signal)
  }

  /** Undoes an admitted decision, within its own window only and never below zero (under "concurrency", frees its slot as `release` does). */
  refund(decision: Decision): Promise<void> {
    return this.counting.corrections.refundAsked(decision)
  }

  /**
   * Settles an admitted decision to the units it really used, once they are known (the `actualCost`
   * option does this after each response): its count moves from its estimate (`decision.cost`) to
   * `actualCost` in the decision's own windows only. Lower gives the difference back, never below zero;
   * higher charges the rest even past the limit, so later requests of that window are refused. A
   * decision settles once: a second settle changes nothing, and a refund after a settle gives back
   * what was finally charged. Changes nothing once the decision's window has ended (per limit, with
   * `limits`), nor for a decision that counted nothing (refused, from the over-limit cache, the
   * `allow`/`deny` failure policies, shadowed) or of another limiter. Rejects with a TollgateError
   * when `actualCost` is not a whole number ≥ 0 or the store has no `settle()`; a store failure is a
   * `storeError` event, as for `refund`.
   */
  settle(decision: Decision, actualCost: number): Promise<void> {
    const settling = this.counting.settling
    if (settling === undefined) return Promise.reject(notRegistered('settle', 'limiter.settle()', 'settling'))
    return settling.asked(decision, actualCost)
  }

  /**
   * Frees the slot an admitted decision holds under algorithm "concurrency", once its work is done:
   * what the adapters do when a response ends or is cut off, and what code outside HTTP does after
   * `consume` (in a `finally`). Once per decision: a second release, or a refund after it, frees
   * nothing more. Under the other algorithms a request's units stay counted in their window when it
   * ends, so `release` changes nothing there (`refund` gives them back). A store failure is a
   * `storeError` event; the slot then frees itself once `window` has passed.
   */
  release(decision: Decision): Promise<void> {
    return this.releases ? this.counting.corrections.refund(decision) : Promise.resolve()
  }

  /** True when adapters must report each response's end or outcome (the skip*Requests options, `actualCost`, algorithm "concurrency"). */
  get wantsCompletion(): boolean {
    return this.response.wantsCompletion
  }

  /** The header record for the decisions made on one request, in this limiter's header style. */
  headers(decisions: readonly Decision[]): Readonly<Record<string, string>> {
    return this.response.headers(decisions)
  }

  /** Status, content type and body of a refused request. */
  rejection(req: Req, decision: Decision): MaybePromise<Rejection> {
    return this.response.rejection(req, decision)
  }

  /** Status, content type and body for a client on the deny list (`decision.denied`). */
  denial(req: Req, decision: Decision): MaybePromise<Rejection> {
    return this.response.denial(req, decision)
  }

  /** Arms the completion hook: once `raw` closes, its outcome decides whether the request counts, and what it cost (`actualCost`). */
  afterResponse(req: Req, res: unknown, raw: NodeResponseLike, decision: Decision): void {
    this.response.afterResponse(req, res, raw, decision)
  }

  /**
   * Reports a response's outcome for `skipFailedRequests`/`skipSuccessfulRequests` and `actualCost`:
   * refunds the request when its outcome says it should not count, and otherwise settles it to its
   * actual cost. Never throws.
   */
  complete(req: Req, res: unknown, decision: Decision, statusCode: number): void {
    this.response.complete(req, res, decision, statusCode)
  }

  /**
   * The one request target of the calls outside HTTP (`consume`, `peek`, `reset`, `wait`): the client key,
   * the max its limit is decided by, and with per-limit keys, the keys the call names (`scope`; for a
   * `reset`, `only`: the limits whose keys it forgets). `check` builds the same from a request (request-inputs.ts).
   */
  private target(key: string, o: (ScopeOptions & { max?: number }) | undefined, reset = false): Target {
    const clientKey = this.inputs.keyOf(key)
    const { scope, only } = this.inputs.scopeOf(clientKey, o, reset)
    return { clientKey, max: this.inputs.staticMax(o?.max, reset ? 0 : undefined), scope, only }
  }

  /** Keeps the telemetry's flag of `decision` listeners, so a decision asks no emitter whether one listens. */
  protected override listenersChanged(event: string | symbol): void {
    if (event === 'decision') this.telemetry.listen(this.listenerCount('decision') > 0)
  }
}

function warnOnSharedPrefix<Req>(config: Config<Req>): void {
  const { store, prefix, logger } = config
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

interface Target {
  readonly clientKey: string
  readonly max: number
  readonly scope: CallScope | undefined
  readonly only: readonly number[] | undefined
}

/** Options of `consume` outside HTTP. */
export interface ConsumeOptions extends ScopeOptions {
  /** Units to count. @default 1 */
  cost?: number
  /** Needed only when the limiter's `max` is a function. */
  max?: number
}

/** Options of `peek` outside HTTP. */
export interface PeekOptions extends ScopeOptions {
  /** Needed only when the limiter's `max` is a function. */
  max?: number
}
