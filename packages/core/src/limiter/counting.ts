import type { Algorithm } from '../algorithms'
import { decide, decisionOf, peekOf } from '../algorithms/decision'
import { fixedWindow } from '../algorithms/fixed-window'
import { TollgateError } from '../errors'
import { windowIndex } from '../keys'
import type { Config } from '../options/parse-options'
import {
  type Decision,
  type DecisionSource,
  isThenable,
  type LimitSpec,
  type MaybePromise,
  type Store,
  type StoreCall,
  type StoreResult,
} from '../types'
import { CallParts, type CallScope } from './call-parts'
import { Leases } from './fast-path/leases'
import { LocalCells } from './fast-path/local-cells'
import { MirrorCells, type MirrorEntry } from './fast-path/mirror-cells'
import { OverLimit } from './fast-path/over-limit'
import { Lockout } from './lockout'
import { RefundLedger } from './refund-ledger'
import type { Resilience } from './resilience'
import type { Telemetry } from './telemetry'

/**
 * The one counting path: a client key, max and cost in, a decision out, the store's returned count
 * (or counts) its only input. The single-limit fixed window takes the store's `increment` fast path
 * when the store has one; everything else is one atomic `admit`. Both map through the algorithm's
 * one verdict (algorithms/decision.ts), and a store failure goes through the same path again with the
 * fallback store, or with the numbers the failure policy gives.
 */
export class Counting<Req> {
  /** Single-limit fixed window on a store with `increment`: the batched INCRBY path with the over-limit cache. */
  private readonly fast: boolean
  /** The store is not in this process: it has a deadline, can fail, and the over-limit cache applies. */
  private readonly remote: boolean
  private readonly refunds: boolean
  /** Clients already over the limit in this window (fast-path/over-limit.ts). */
  private readonly over = new OverLimit()
  /** What each refund undoes, once (refund-ledger.ts). */
  private readonly ledger: RefundLedger
  /** Keep every admitted decision's call: with the refund options, or when the algorithm refunds by call id. */
  private readonly keepCalls: boolean
  private readonly parts: CallParts
  private readonly lockout: Lockout
  /** The memory store's cells of this limiter's clients (fast-path/local-cells.ts); unset for other stores and with refunds. */
  private readonly cells: LocalCells | undefined
  /** Fast path, remote store with the fallback: each client's store key and last returned count (fast-path/mirror-cells.ts), one lookup. */
  private readonly mirror: MirrorCells | undefined
  /** The `lease` option on a remote store: each client's slice of its quota (fast-path/leases.ts). */
  private readonly leases: Leases | undefined

  constructor(
    private readonly config: Config<Req>,
    private readonly algorithm: Algorithm,
    private readonly resilience: Resilience,
    private readonly telemetry: Telemetry,
    private readonly emit: (event: string, value?: unknown) => void,
  ) {
    this.fast = algorithm.increments === true && config.limits === undefined && typeof config.store.increment === 'function'
    this.remote = !config.store.local
    this.refunds = config.skipFailedRequests || config.skipSuccessfulRequests
    // A decision over per-limit keys does not name them all: its call cannot be rebuilt from it.
    this.keepCalls = this.refunds || algorithm.refundsByCallId || config.limitKeys !== undefined
    this.parts = new CallParts(config as Config<unknown>, algorithm)
    this.ledger = new RefundLedger(this.parts)
    // Refunds keep each decision's call, which needs the store key: they take the increment path.
    this.cells = this.fast && !this.refunds ? LocalCells.of(config.store, this.parts) : undefined
    this.mirror =
      this.fast && this.remote && !this.refunds && config.onStoreError === 'fallback'
        ? new MirrorCells(this.parts, resilience.fallback, config.windowMs)
        : undefined
    this.lockout = new Lockout(config as Config<unknown>, this, this.parts, resilience, telemetry, emit)
    this.leases =
      config.lease !== undefined && this.remote
        ? new Leases(
            config.lease,
            config.store,
            telemetry,
            this.parts,
            resilience,
            config.windowMs,
            config.onStoreError,
            algorithm as Algorithm & { lease: NonNullable<Algorithm['lease']> },
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
      this.config.blockMs > 0 ? this.lockout.count(clientKey, limit, cost, now) : this.countAt(clientKey, limit, cost, now, scope)
    return report ? this.telemetry.decided(decision) : decision
  }

  /** The count of `count`, at `now`, for `limit` (lockout.ts wraps it). */
  countAt(clientKey: string, limit: LimitSpec, cost: number, now: number, scope?: CallScope): MaybePromise<Decision> {
    const c = this.config
    const { max } = limit
    if (this.leases !== undefined && limit.keyed !== true) return this.leases.count(clientKey, limit, cost, now)
    if (this.remote) {
      if (this.fast && limit.keyed !== true) {
        // Off with refunds: a refund elsewhere can bring a count back under the limit.
        const known = this.refunds ? undefined : this.over.known(clientKey, windowIndex(now, c.windowMs), now)
        if (known !== undefined && known + cost > max) return this.fromCount(clientKey, undefined, known + cost, limit, cost, now, 'cache')
      }
      if (this.resilience.degraded && this.resilience.isOpen(scope?.storeKey ?? this.parts.storeKey(clientKey), now))
        return this.failed(undefined, clientKey, limit, cost, now, scope)
    }
    return this.countIn(c.store, 'store', clientKey, limit, cost, now, scope)
  }

  /** A request's keys when limits have keys of their own (CallParts.scope). */
  scope(clientKey: string, own: readonly (string | undefined)[], tag: string | undefined): CallScope {
    return this.parts.scope(clientKey, own, tag)
  }

  /** The decision for a client on the deny list: refused with no wait to suggest, counted nowhere, no `limited` event. */
  deny(clientKey: string, max: number): Decision {
    const now = this.config.clock()
    const decision: Decision = {
      allowed: false,
      denied: true,
      limit: max,
      remaining: 0,
      count: 0,
      resetAt: now,
      retryAfterMs: 0,
      at: now,
      key: clientKey,
      policy: this.parts.limitFor(max).policy,
      source: 'denyList',
      cost: 0,
    }
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
    if (this.config.blockMs <= 0) return this.peekCount(clientKey, limit, now, scope)
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
    if (this.config.blockMs <= 0) return counts
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
    this.over.forget(clientKey)
    this.cells?.forget(clientKey)
    this.mirror?.forget(clientKey)
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

  /** Undoes an admitted decision of this limiter, in the store that counted it, once (RefundLedger). */
  async refund(decision: Decision): Promise<void> {
    if (!decision.allowed || decision.shadowed || (decision.source !== 'store' && decision.source !== 'fallback')) return
    const call = this.ledger.take(decision)
    if (call === undefined) return
    // The count may fall back under the limit: the cached "over" verdict no longer holds.
    this.over.forget(decision.key)
    try {
      await (decision.source === 'fallback'
        ? this.resilience.fallback.refund(call)
        : this.telemetry.timed('refund', call.storeKey, () => this.config.store.refund(call)))
    } catch (error) {
      this.emit('storeError', error)
    }
  }

  /**
   * Moves an admitted decision of this limiter from its estimate to `actual` units, in the store that
   * counted it and in the decision's own windows (Store.settle), once (RefundLedger). The settle's time
   * is now: a decision whose window has ended is left as it was.
   */
  async settle(decision: Decision, actual: number): Promise<void> {
    if (!decision.allowed || decision.shadowed || (decision.source !== 'store' && decision.source !== 'fallback')) return
    const call = this.ledger.settle(decision, actual)
    if (call === undefined || call.cost === actual) return
    // Lower, the count may fall back under the limit: the cached "over" verdict no longer holds.
    if (actual < call.cost) this.over.forget(decision.key)
    const now = this.config.clock()
    try {
      await (decision.source === 'fallback'
        ? this.resilience.fallback.settle(call, actual, now)
        : this.telemetry.timed('settle', call.storeKey, () => this.config.store.settle!(call, actual, now)))
    } catch (error) {
      this.emit('storeError', error)
    }
  }

  /** Counts in `store`: the fast path's increment, or one atomic admit for every limit. */
  private countIn(
    store: Store,
    source: DecisionSource,
    clientKey: string,
    limit: LimitSpec,
    cost: number,
    now: number,
    scope?: CallScope,
  ): MaybePromise<Decision> {
    // No closure here: a function that creates one allocates its captured variables on every call,
    // taken or not. The continuations of a promise are built in `settled`.
    // The configured store's calls are timed (telemetry.ts), not the fallback's. `started` is -1 again
    // once the call returned, so the catch below records only a store call that threw.
    let started = source === 'store' ? this.telemetry.start() : -1
    try {
      if (this.fast) {
        const cells = this.cells
        if (cells?.current && started < 0 && source === 'store' && limit.keyed !== true) {
          return this.fromCount(clientKey, undefined, cells.add(clientKey, cost, limit.windowMs, now), limit, cost, now, source)
        }
        const entry = source === 'store' && limit.keyed !== true ? this.mirror?.entry(clientKey, now) : undefined
        const key = entry !== undefined ? entry.key : this.parts.fastKey(clientKey, limit)
        let counted = store.increment!(key, cost, limit.windowMs, now)
        if (started >= 0) {
          counted = this.telemetry.settle('increment', key, started, counted)
          started = -1
        }
        if (!isThenable(counted)) return this.fromCount(clientKey, key, counted, limit, cost, now, source, entry)
        return this.settled(counted, undefined, key, clientKey, limit, cost, now, source, entry)
      }
      const call = this.parts.call(clientKey, this.parts.limitsFor(limit), cost, now, scope)
      let result = store.admit(call)
      if (started >= 0) {
        result = this.telemetry.settle('admit', call.storeKey, started, result)
        started = -1
      }
      if (!isThenable(result)) return this.fromResult(call, result, clientKey, source)
      return this.settled(result, call, undefined, clientKey, limit, cost, now, source, undefined, scope)
    } catch (error) {
      if (started >= 0)
        this.telemetry.threw(this.fast ? 'increment' : 'admit', scope?.storeKey ?? this.parts.storeKey(clientKey), started, error)
      if (source !== 'store' || !this.remote) throw error
      return this.failed(error, clientKey, limit, cost, now, scope)
    }
  }

  /** The decision once a store's promise settles: the increment's count (`key`) or the admit's result (`call`). */
  private settled(
    answer: Promise<number> | Promise<StoreResult>,
    call: StoreCall | undefined,
    key: string | undefined,
    clientKey: string,
    limit: LimitSpec,
    cost: number,
    now: number,
    source: DecisionSource,
    entry?: MirrorEntry,
    scope?: CallScope,
  ): Promise<Decision> {
    const failed =
      source === 'store' && this.remote ? (error: unknown) => this.failed(error, clientKey, limit, cost, now, scope) : undefined
    if (call !== undefined) return (answer as Promise<StoreResult>).then((r) => this.fromResult(call, r, clientKey, source), failed)
    return (answer as Promise<number>).then((n) => this.fromCount(clientKey, key, n, limit, cost, now, source, entry), failed)
  }

  /** The fast path's decision from the count INCRBY returned (`key` unset for a cached verdict; `entry`, the client's mirror entry). */
  private fromCount(
    clientKey: string,
    key: string | undefined,
    count: number,
    limit: LimitSpec,
    cost: number,
    now: number,
    source: DecisionSource,
    entry?: MirrorEntry,
  ): Decision {
    const { max, windowMs } = limit
    if (source === 'store' && this.remote && key !== undefined) {
      const r = this.resilience
      if (r.degraded) r.answered(key)
      if (entry === undefined) count = r.mirrorCount(key, windowMs, now, count, cost)
      else {
        count = r.afterFallback(key, windowMs, now, count, cost)
        this.mirror!.keep(entry, count, now)
      }
      if (count > max && !this.refunds && limit.keyed !== true) this.over.remember(clientKey, count, windowIndex(now, windowMs), now)
    }
    const decision = decide(fixedWindow, limit, count - cost, count, count <= max, cost, now, clientKey, source)
    if (this.refunds && decision.allowed && key !== undefined) {
      this.ledger.keep(decision, { algorithm: 'fixed-window', storeKey: key, limits: [limit], cost, now, id: this.parts.nextId() })
    }
    return this.finish(decision)
  }

  /** The decision from an admit: one per limit, the decisive one carrying them all when there are several. */
  private fromResult(call: StoreCall, result: StoreResult, clientKey: string, source: DecisionSource): Decision {
    if (source === 'store' && this.remote) {
      const r = this.resilience
      if (r.degraded) r.answered(call.storeKey)
      const local = r.mirrorResult(call, result)
      if (local !== undefined) {
        // Right after an outage the fallback's admissions count too: it refused what the store admitted.
        result = local
        source = 'fallback'
      }
    }
    const decision = decisionOf(this.algorithm, call, result, clientKey, source)
    if (this.keepCalls && decision.allowed && (source === 'store' || source === 'fallback')) this.ledger.keep(decision, call)
    return this.finish(decision)
  }

  /** The store failed (or the circuit is open: `error` undefined): decide by the failure policy. */
  private failed(error: unknown, clientKey: string, limit: LimitSpec, cost: number, now: number, scope?: CallScope): Decision {
    const c = this.config
    if (scope !== undefined && c.hashTag === undefined && error instanceof Error && /\bCROSSSLOT\b/.test(error.message)) {
      throw this.noHashTag(error)
    }
    if (error !== undefined) this.resilience.failed(error, scope?.storeKey ?? this.parts.storeKey(clientKey), now)
    if (c.onStoreError === 'fallback') {
      // Decided now, not at the failed call's start: after a timeout that was a deadline ago, and the
      // fallback's windows may have moved on meanwhile (an earlier time would count into a window it
      // has already left, and admit past the limit near an edge).
      const at = Math.max(now, c.clock())
      this.resilience.fellBack(at)
      // The store's last count of the client goes into the fallback first, so it continues from there.
      if (limit.keyed !== true) this.mirror?.handOver(clientKey, at)
      const decision = this.countIn(this.resilience.fallback, 'fallback', clientKey, limit, cost, at, scope) as Decision
      this.emit('fallback', decision)
      return decision
    }
    const call = this.parts.call(clientKey, this.parts.limitsFor(limit), cost, now, scope)
    return this.fromResult(
      call,
      this.resilience.unavailable(this.algorithm, call.limits, now, c.onStoreError === 'allow'),
      clientKey,
      c.onStoreError,
    )
  }

  /**
   * A store that could not tell it is a Redis Cluster (Store.cluster) refused keys of one call in
   * different slots: without `hashTag` that happens to the requests whose keys differ in slot, so it
   * is a misconfiguration, reported as one, never a failure policy applied to some requests at random.
   */
  private noHashTag(error: Error): TollgateError {
    const problem = new TollgateError(
      `Invalid option "hashTag": limits have keys of their own and the store refused keys of one call in different Redis Cluster slots (${error.message}); give the limiter a hashTag option, a function of the request returning the hash tag its keys share (e.g. (req) => req.user.tenant)`,
      'TG_INVALID_OPTION',
      { cause: error },
    )
    if (!this.crossSlotLogged) {
      this.crossSlotLogged = true
      this.config.logger.error(`Tollgate: ${problem.detail}`, error)
    }
    return problem
  }
  private crossSlotLogged = false

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
