import type { Algorithm } from '../algorithms'
import type { LeaseModel } from '../algorithms/algorithm'
import { decisionOf, deniedDecision, peekOf } from '../algorithms/decision'
import type { Config } from '../options/parse-options'
import { KIT } from '../registry'
import { type AlgorithmName, type Decision, isThenable, type LimitSpec, type MaybePromise, type StoreCall } from '../types'
import { CallParts, type CallScope } from './call-parts'
import { Corrections } from './corrections'
import type { Resilience } from './failures'
import type { Leases } from './fast-path/leases'
import type { Lockout } from './lockout'
import type { notLeased } from './not-leased'
import { choosePath } from './paths/choose'
import type { CountPath, PathHost } from './paths/count-path'
import { RefundLedger } from './refund-ledger'
import type { Telemetry } from './reporting'
import type { Settling } from './settling'

/** What counting reads of the leasing feature's slot (features.ts writes it, checked against this). */
export interface LeaseCounting {
  readonly Leases: typeof Leases
  readonly models: { readonly [N in AlgorithmName]?: LeaseModel }
  readonly refuse: typeof notLeased
}

/**
 * The one counting path: a client key, max and cost in, a decision out, the store's returned count
 * (or counts) its only input. How it counts is picked once, here, at construction (paths/count-path.ts):
 * the increment path or the admit path, with the `lease` option's slices in front on a remote store.
 * Both map through the algorithm's one verdict (algorithms/decision.ts), and a store failure goes through
 * the same path again with the fallback store, or with the numbers the failure policy gives.
 */
export class Counting<Req> implements PathHost {
  /** The store is not in this process: it has a deadline, can fail, and kept refusals apply. */
  private readonly remote: boolean
  /** Refunds (corrections.ts). */
  readonly corrections: Corrections
  /** Settles to the actual cost (settling.ts), when the settling feature is registered. */
  readonly settling: Settling | undefined
  private readonly parts: CallParts
  /** `blockDuration` (lockout.ts): undefined without it. */
  private readonly lockout: Lockout | undefined
  private readonly path: CountPath
  /** The `lease` option on a remote store: each client's slice of its quota (fast-path/leases.ts). */
  private readonly leases: Leases | undefined

  constructor(
    private readonly config: Config<Req>,
    private readonly algorithm: Algorithm,
    private readonly resilience: Resilience,
    private readonly telemetry: Telemetry,
    private readonly emit: (event: string, value?: unknown) => void,
  ) {
    this.remote = !config.store.local
    this.parts = new CallParts(config as Config<unknown>, algorithm)
    const ledger = new RefundLedger(this.parts)
    this.path = choosePath(config as Config<unknown>, algorithm, this.parts, resilience, telemetry, ledger, this)
    this.corrections = new Corrections(
      ledger,
      config.store,
      () => resilience.fallback,
      telemetry,
      (clientKey) => this.path.forget(clientKey),
      emit,
      config.lease === undefined ? undefined : (KIT.leasing as LeaseCounting).refuse,
    )
    const SettlingOf = KIT.Settling as typeof Settling | undefined
    this.settling = SettlingOf === undefined ? undefined : new SettlingOf(config as Config<unknown>, this.corrections)
    // Registered whenever the options asked for them (parse-options.ts refuses them otherwise).
    const LockoutOf = KIT.Lockout as typeof Lockout
    this.lockout = config.blockMs > 0 ? new LockoutOf(config as Config<unknown>, this, this.parts, resilience, telemetry, emit) : undefined
    const leasing = KIT.leasing as LeaseCounting | undefined
    const model = leasing?.models[algorithm.name]
    this.leases =
      config.lease !== undefined && this.remote && model !== undefined
        ? new leasing!.Leases(
            config.lease,
            config.store,
            telemetry,
            this.parts,
            resilience,
            config.windowMs,
            config.onStoreError,
            algorithm,
            model,
            config.clock,
            (clientKey, limit, cost, now) => this.failed(undefined, clientKey, limit, cost, now),
            (decision) => this.finish(decision),
          )
        : undefined
  }

  /** Gives back what `lease` holds (limiter.close()). */
  close(): Promise<void> {
    return this.leases === undefined ? Promise.resolve() : this.leases.close()
  }

  /**
   * `windowMs` is the request's own window, from a `window` function; `scope`, the request's keys when
   * limits have keys of their own (CallParts.scope).
   */
  count(clientKey: string, max: number, cost: number, windowMs?: number, scope?: CallScope): MaybePromise<Decision> {
    const now = this.config.clock()
    const limit = windowMs === undefined ? this.parts.limitFor(max) : this.parts.windowedLimit(max, windowMs)
    // One comparison when nothing wants decisions. Reported here, once final (after a lockout has set
    // its end), and never for the fallback's inner count.
    const report = now >= this.telemetry.wake && this.telemetry.wants(now)
    const decision =
      this.lockout !== undefined ? this.lockout.count(clientKey, limit, cost, now) : this.countAt(clientKey, limit, cost, now, scope)
    return report ? this.telemetry.decided(decision) : decision
  }

  /** The count of `count`, at `now`, for `limit` (lockout.ts wraps it). */
  countAt(clientKey: string, limit: LimitSpec, cost: number, now: number, scope?: CallScope): MaybePromise<Decision> {
    if (this.leases !== undefined && limit.keyed !== true) return this.leases.count(clientKey, limit, cost, now)
    if (this.remote) {
      const known = this.path.known(clientKey, limit, cost, now)
      if (known !== undefined) return known
      if (this.resilience.degraded && this.resilience.isOpen(scope?.storeKey ?? this.parts.storeKey(clientKey), now))
        return this.failed(undefined, clientKey, limit, cost, now, scope)
    }
    return this.countIn(false, clientKey, limit, cost, now, scope)
  }

  /** A request's keys when limits have keys of their own (CallParts.scope). */
  scope(clientKey: string, own: readonly (string | undefined)[], tag: string | undefined): CallScope {
    return this.parts.scope(clientKey, own, tag)
  }

  /** The decision for a client on the deny list: refused with no wait to suggest, counted nowhere, no `limited` event. */
  deny(clientKey: string, max: number): Decision {
    const now = this.config.clock()
    const decision = deniedDecision(this.parts.limitFor(max), clientKey, now)
    return now >= this.telemetry.wake && this.telemetry.wants(now) ? (this.telemetry.decided(decision) as Decision) : decision
  }

  /** The limits a count of `max` is decided by, as its decisions report them (their policies). */
  limitsOf(max: number): readonly LimitSpec[] {
    return this.parts.limitsFor(this.parts.limitFor(max))
  }

  /**
   * What `clientKey` has left, counting nothing and emitting nothing (see decision.ts, peekAt). A
   * client under a `blockDuration` block gets the refusal `count` would give it (lockout.ts).
   */
  peek(clientKey: string, max: number, scope?: CallScope): MaybePromise<Decision> {
    const now = this.config.clock()
    const limit = this.parts.limitFor(max)
    if (this.lockout === undefined) return this.peekCount(clientKey, limit, now, scope)
    const blocked = this.lockout.peek(clientKey, limit, now)
    if (isThenable(blocked)) return blocked.then((d) => d ?? this.peekCount(clientKey, limit, now))
    return blocked ?? this.peekCount(clientKey, limit, now)
  }

  /** The peek of the counts: a call of cost 0. */
  private peekCount(clientKey: string, limit: LimitSpec, now: number, scope?: CallScope): MaybePromise<Decision> {
    const call = this.parts.call(clientKey, this.parts.limitsFor(limit), 0, now, scope)
    const result = this.telemetry.timed('admit', call.storeKey, () => this.config.store.admit(call))
    const algorithm = this.algorithm
    return isThenable(result) ? result.then((r) => peekOf(algorithm, call, r, clientKey)) : peekOf(algorithm, call, result, clientKey)
  }

  /**
   * Forgets everything counted for `clientKey` (in the current window, for the window algorithms) and
   * ends its block: in the store, and in every cache of this process that could still refuse it (the
   * over-limit verdicts, the mirror and the fallback store's counts, the lockout's known blocks).
   */
  forget(clientKey: string, max: number, scope?: CallScope, only?: readonly number[]): MaybePromise<void> {
    const call = this.forgetHere(clientKey, this.parts.limitFor(max), this.config.clock(), scope, only)
    // Every limit has a key of its own and none was named: nothing of this key to forget.
    if (call.limits.length === 0) return
    const counts = this.telemetry.timed('forget', call.storeKey, () => this.config.store.forget(call))
    if (this.lockout === undefined) return counts
    // Sent after the counts' deletion, on the same connection for a Redis store: a request that finds
    // the block gone finds the counts gone too, and does not start a new block from the old count.
    const block = this.lockout.forget(clientKey)
    if (!isThenable(counts) && !isThenable(block)) return
    return Promise.all([counts, block]).then(() => undefined)
  }

  /**
   * Drops what this process remembers of `clientKey`'s counts: its over-limit verdict, its cell and
   * mirror entry, and the fallback store's copy, which would otherwise continue from a count the
   * store no longer has. Returns the call that names the client's counts.
   */
  forgetHere(clientKey: string, limit: LimitSpec, now: number, scope?: CallScope, only?: readonly number[]): StoreCall {
    this.path.forget(clientKey)
    this.leases?.forget(clientKey)
    let call = this.parts.call(clientKey, this.parts.limitsFor(limit), 0, now, scope)
    if (only !== undefined) {
      // Per-limit keys: the limits whose keys the caller named, and only those (limiter.ts, reset).
      const pick = <T>(all: readonly T[]) => only.map((i) => all[i]!)
      call = { ...call, limits: pick(call.limits), stems: pick(call.stems!), keys: pick(call.keys!) }
    }
    this.resilience.forget(call)
    return call
  }

  /** Counts in `store` by the path; a store that throws goes to the failure policy, as one that rejects does. */
  private countIn(
    fallback: boolean,
    clientKey: string,
    limit: LimitSpec,
    cost: number,
    now: number,
    scope?: CallScope,
  ): MaybePromise<Decision> {
    try {
      return this.path.count(fallback, clientKey, limit, cost, now, scope)
    } catch (error) {
      if (fallback || !this.remote) throw error
      return this.failed(error, clientKey, limit, cost, now, scope)
    }
  }

  /** The store failed (or the circuit is open: `error` undefined): decide by the failure policy. */
  failed(error: unknown, clientKey: string, limit: LimitSpec, cost: number, now: number, scope?: CallScope): Decision {
    const c = this.config
    if (scope !== undefined && c.hashTag === undefined) {
      const problem = this.resilience.misconfigured(error)
      if (problem !== undefined) throw problem
    }
    if (error !== undefined) this.resilience.failed(error, scope?.storeKey ?? this.parts.storeKey(clientKey), now)
    if (c.onStoreError === 'fallback') {
      // Decided now, not at the failed call's start: after a timeout that was a deadline ago, and the
      // fallback's windows may have moved on meanwhile (an earlier time would count into a window it
      // has already left, and admit past the limit near an edge).
      const at = Math.max(now, c.clock())
      this.resilience.fellBack(at)
      // The store's last count of the client goes into the fallback first, so it continues from there.
      if (limit.keyed !== true) this.path.handOver(clientKey, at)
      const decision = this.countIn(true, clientKey, limit, cost, at, scope) as Decision
      this.emit('fallback', decision)
      return decision
    }
    const call = this.parts.call(clientKey, this.parts.limitsFor(limit), cost, now, scope)
    const numbers = this.resilience.unavailable(this.algorithm, call.limits, now, c.onStoreError === 'allow')
    return this.finish(decisionOf(this.algorithm, call, numbers, clientKey, c.onStoreError))
  }

  /** Reports a refusal; in shadow mode the verdict is reported (headers, events) but never enforced. */
  finish(decision: Decision): Decision {
    if (!decision.allowed) {
      this.emit('limited', decision)
      if (this.config.shadow) {
        decision.allowed = true
        decision.shadowed = true
        decision.retryAfterMs = 0
      }
    }
    return decision
  }
}
