import type { Algorithm } from '../algorithms'
import { describeValue, invalidOption, TollgateError } from '../errors'
import type { Config } from '../options/parse-options'
import { MemoryStore } from '../stores/memory-store'
import type { LimitSpec, StoreCall, StoreResult } from '../types'
import { type Resilience, unavailable } from './failures'

/** After a failure, requests for the failed node go straight to the failure policy for this long before it is tried again. */
const STORE_RETRY_MS = 1000

/**
 * Errors that belong to one call (its keys, or its slot while a Cluster moves it), not to the node
 * that answered: they open no circuit, so the node's other clients keep their store decisions.
 */
const CALL_ERRORS = /\b(WRONGTYPE|CROSSSLOT|TRYAGAIN|MOVED|ASK|Too many Cluster redirections)\b/

interface NodeState {
  downUntil: number
}

/**
 * What a limiter does when its store fails or misses its deadline (`onStoreError`), scoped to what
 * failed: a circuit per store node (a Redis Cluster node; a store without `nodeOf` is one node) that
 * skips the node for a while after a failure, while clients on the other nodes keep their store
 * decisions; an error that belongs to one call (WRONGTYPE, CROSSSLOT) affects that call only. One log
 * line when a node goes down and one when it answers again.
 *
 * The fallback continues the count: every answer of the store is mirrored into the fallback store
 * (`mirror*`; on the fast path the limiter keeps the counts and hands a client's to the fallback store
 * just before the fallback decides for it, fast-path/mirror-cells.ts), so within a window the fallback starts
 * from the last count the store returned for that client, and one process never admits more than
 * `max` per client-window across a stall, a kill or a failover. (Several processes each continue from the last count they saw; the other processes'
 * requests during the outage are not seen, so together they admit at most `max` plus what each
 * admits on its own during the outage.)
 *
 * It returns stores and numbers, never decisions: counting.ts turns them into decisions on its one path.
 */
export class StoreResilience implements Resilience {
  /** Nodes that failed and have not answered since. */
  private readonly down = new Map<string, NodeState>()
  /** When each node last answered again after failing: a call sent before then is older news than that answer. */
  private readonly backAt = new Map<string, number>()
  /** True while any node is down: the only check healthy traffic pays. */
  degraded = false
  private readonly warned = new Set<string>()
  private fallbackStore: MemoryStore | undefined
  /** When the fallback last decided a request: its counts matter to the store's for a window after. */
  private fellBackAt = Number.NEGATIVE_INFINITY

  constructor(
    private readonly config: Config<unknown>,
    private readonly emit: (event: string, value?: unknown) => void,
  ) {
    // Per-limit keys without a shared hash tag land in different slots: Redis Cluster refuses such a
    // script (CROSSSLOT), for the requests whose keys happen to differ in slot. Refused here, for all.
    if (config.limitKeys !== undefined && config.hashTag === undefined && config.store.cluster === true) {
      throw invalidOption(
        'hashTag',
        'a function of the request returning the hash tag its keys share (e.g. (req) => req.user.tenant): the store is a Redis Cluster and limits have keys of their own',
        undefined,
      )
    }
    // Created up front when it will mirror the store's counts (see above).
    if (!config.store.local && config.onStoreError === 'fallback') this.fallbackStore = new MemoryStore({ logger: config.logger })
  }

  /** How many nodes have failed and not answered since (the `tollgate.store.degraded_nodes` gauge). */
  get downNodes(): number {
    return this.down.size
  }

  /** True while the circuit of `storeKey`'s node is open: decide without asking the store. */
  isOpen(storeKey: string, now: number): boolean {
    if (!this.degraded) return false
    const state = this.down.get(this.nodeOf(storeKey))
    return state !== undefined && now < state.downUntil
  }

  /** A store call for `storeKey`, sent at `now`, failed. */
  failed(error: unknown, storeKey: string, now: number): void {
    this.emit('storeError', error)
    const c = this.config
    const reason = error instanceof Error ? error.message : describeValue(error)
    if (CALL_ERRORS.test(reason)) {
      this.warnOnce(
        `call:${CALL_ERRORS.exec(reason)![1]}`,
        `Tollgate: a store call failed for one client key (${reason}); that request was decided by onStoreError "${c.onStoreError}", other keys are unaffected`,
      )
      return
    }
    const node = this.nodeOf(storeKey)
    const state = this.down.get(node)
    if (state !== undefined) {
      state.downUntil = now + STORE_RETRY_MS
      return
    }
    // A call sent before the node answered again, failing after that answer (its deadline ran out while
    // the node came back, or it went down with the old connection): the node has answered since, so
    // this opens no new outage. A node that fails again fails the calls sent after its answer too.
    if (now < (this.backAt.get(node) ?? Number.NEGATIVE_INFINITY)) return
    this.down.set(node, { downUntil: now + STORE_RETRY_MS })
    this.degraded = true
    c.logger.error(
      `Tollgate: the store failed${node ? ` on node ${node}` : ''} (${reason}); applying onStoreError "${c.onStoreError}"${node ? ' to the keys of that node' : ''} until it answers again`,
      error,
    )
  }

  /** The store answered a call for `storeKey` (called only while `degraded`). */
  answered(storeKey: string): void {
    const node = this.nodeOf(storeKey)
    if (!this.down.delete(node)) return
    this.backAt.set(node, this.config.clock())
    this.degraded = this.down.size > 0
    this.config.logger.warn(`Tollgate: the store is answering again${node ? ` (node ${node})` : ''}; decisions come from it again`)
    this.emit('recover', node || undefined)
  }

  /** The local store that keeps limiting during an outage (`onStoreError: "fallback"`). */
  get fallback(): MemoryStore {
    this.fallbackStore ??= new MemoryStore({ logger: this.config.logger })
    return this.fallbackStore
  }

  /**
   * Mirrors a count the store returned on the fast path into the fallback, and returns the count to
   * decide by. Right after the fallback decided (in this window or the last), what it admitted counts
   * too: the larger of the store's count and the fallback's plus this request. A call that timed out at
   * the start of a stall was admitted by the fallback and may still reach Redis after it: without this,
   * the client would get one request more than its max.
   */
  mirrorCount(key: string, windowMs: number, now: number, count: number, cost: number): number {
    const store = this.fallbackStore
    if (store === undefined || this.config.onStoreError !== 'fallback') return count
    if (now - this.fellBackAt < windowMs) {
      const local = store.countOf(key, windowMs, now) + cost
      if (local > count) count = local
    }
    store.seedCount(key, windowMs, now, count)
    return count
  }

  /**
   * `mirrorCount` for a client whose count the limiter keeps itself (fast-path/mirror-cells.ts, handed to the
   * fallback before it decides): the fallback store is read and written only right after the fallback
   * decided, when what it admitted counts too.
   */
  afterFallback(key: string, windowMs: number, now: number, count: number, cost: number): number {
    return now - this.fellBackAt < windowMs ? this.mirrorCount(key, windowMs, now, count, cost) : count
  }

  /** The call's client was reset: the fallback must not continue from a count the store no longer has. */
  forget(call: StoreCall): void {
    this.fallbackStore?.forget(call)
  }

  /** The fallback decided a request at `now`. */
  fellBack(now: number): void {
    this.fellBackAt = now
  }

  /**
   * Mirrors the store's answer to an admit into the fallback. Right after the fallback decided (as in
   * mirrorCount), a call the store admitted must fit the fallback's count too, which holds what the
   * fallback admitted meanwhile: when it does not, the fallback's refusal is returned (the store then
   * holds one unit more than was admitted, which only errs on the safe side until the window ends).
   */
  mirrorResult(call: StoreCall, result: StoreResult): StoreResult | undefined {
    const store = this.fallbackStore
    if (store === undefined || this.config.onStoreError !== 'fallback') return undefined
    let refused: StoreResult | undefined
    if (result.allowed && call.cost > 0 && this.recentlyFellBack(call)) {
      const local = store.admit(call)
      if (!local.allowed) refused = local
    }
    store.seed(call, result)
    return refused
  }

  /** True when the fallback decided within the longest window of the call's limits. */
  private recentlyFellBack(call: StoreCall): boolean {
    let longest = 0
    for (const limit of call.limits) if (limit.windowMs > longest) longest = limit.windowMs
    return call.now - this.fellBackAt < longest
  }

  /** The store's answer under `onStoreError: "allow"` or `"deny"`: a full or an exhausted quota. */
  unavailable(algorithm: Algorithm, limits: readonly LimitSpec[], now: number, allow: boolean): StoreResult {
    return unavailable(algorithm, limits, now, allow)
  }

  misconfigured(error: unknown): TollgateError | undefined {
    if (!(error instanceof Error) || !/\bCROSSSLOT\b/.test(error.message)) return undefined
    const problem = noHashTag(error)
    this.warnOnce('crossslot', `Tollgate: ${problem.detail}`, 'error', error)
    return problem
  }

  private nodeOf(storeKey: string): string {
    return this.config.store.nodeOf?.(storeKey) ?? ''
  }

  private warnOnce(id: string, message: string, level: 'warn' | 'error' = 'warn', cause?: unknown): void {
    if (this.warned.has(id)) return
    this.warned.add(id)
    if (level === 'error') this.config.logger.error(message, cause)
    else this.config.logger.warn(message)
  }
}

/**
 * A store that could not tell it is a Redis Cluster (Store.cluster) refused keys of one call in
 * different slots: without `hashTag` that happens to the requests whose keys differ in slot, so it
 * is a misconfiguration, reported as one, never a failure policy applied to some requests at random.
 */
function noHashTag(error: Error): TollgateError {
  return new TollgateError(
    `Invalid option "hashTag": limits have keys of their own and the store refused keys of one call in different Redis Cluster slots (${error.message}); give the limiter a hashTag option, a function of the request returning the hash tag its keys share (e.g. (req) => req.user.tenant)`,
    'TG_INVALID_OPTION',
    { cause: error },
  )
}
