import type { Algorithm } from '../algorithms'
import type { TollgateError } from '../errors'
import type { Config } from '../options/parse-options'
import { MemoryStore } from '../stores/memory-store'
import type { LimitSpec, StoreCall, StoreResult } from '../types'

/**
 * What the counting path asks of the failure policy (`onStoreError`): for a store outside the process, its
 * circuits per node and the fallback's mirror of the store's counts (resilience.ts, which comes with the
 * remoteStores feature); for a store in the process, nothing of that (LocalFailures).
 */
export interface Resilience {
  /** True while any node is down: the only check healthy traffic pays. */
  readonly degraded: boolean
  /** How many nodes have failed and not answered since (the `tollgate.store.degraded_nodes` gauge). */
  readonly downNodes: number
  /** True while the circuit of `storeKey`'s node is open: decide without asking the store. */
  isOpen(storeKey: string, now: number): boolean
  /** A store call for `storeKey`, sent at `now`, failed. */
  failed(error: unknown, storeKey: string, now: number): void
  /** The store answered a call for `storeKey` (called only while `degraded`). */
  answered(storeKey: string): void
  /** The local store that keeps limiting during an outage (`onStoreError: "fallback"`). */
  readonly fallback: MemoryStore
  /** Mirrors a count the store returned on the fast path into the fallback; returns the count to decide by. */
  mirrorCount(key: string, windowMs: number, now: number, count: number, cost: number): number
  /** `mirrorCount` for a client whose count the limiter keeps itself (fast-path/mirror-cells.ts). */
  afterFallback(key: string, windowMs: number, now: number, count: number, cost: number): number
  /** Mirrors the store's answer to an admit into the fallback; the fallback's refusal when it must prevail. */
  mirrorResult(call: StoreCall, result: StoreResult): StoreResult | undefined
  /** The call's client was reset: the fallback must not continue from a count the store no longer has. */
  forget(call: StoreCall): void
  /** The fallback decided a request at `now`. */
  fellBack(now: number): void
  /** The store's answer under `onStoreError: "allow"` or `"deny"`: a full or an exhausted quota. */
  unavailable(algorithm: Algorithm, limits: readonly LimitSpec[], now: number, allow: boolean): StoreResult
  /**
   * The misconfiguration a failed call over per-limit keys without `hashTag` reveals, to throw rather than
   * apply the failure policy (a Redis Cluster's CROSSSLOT), logged once; undefined for any other failure.
   */
  misconfigured(error: unknown): TollgateError | undefined
}

/** The store's answer under `onStoreError: "allow"` or `"deny"`: a full or an exhausted quota. */
export function unavailable(algorithm: Algorithm, limits: readonly LimitSpec[], now: number, allow: boolean): StoreResult {
  const values: number[] = []
  for (const limit of limits) algorithm.unavailable(limit, now, allow, values)
  return { allowed: allow, values }
}

/**
 * The failure policy of a store in this process: no deadline, no node to lose, no count to mirror. Its
 * calls that throw reach the caller (counting.ts); a lockout's failed write is reported as a remote
 * store's would be.
 */
export class LocalFailures implements Resilience {
  readonly degraded = false
  readonly downNodes = 0
  private fallbackStore: MemoryStore | undefined

  constructor(
    private readonly config: Config<unknown>,
    private readonly emit: (event: string, value?: unknown) => void,
  ) {}

  isOpen(): boolean {
    return false
  }

  failed(error: unknown): void {
    this.emit('storeError', error)
    this.config.logger.error('Tollgate: the store failed; applying onStoreError to this call', error)
  }

  answered(): void {}

  get fallback(): MemoryStore {
    this.fallbackStore ??= new MemoryStore({ logger: this.config.logger })
    return this.fallbackStore
  }

  mirrorCount(_key: string, _windowMs: number, _now: number, count: number): number {
    return count
  }

  afterFallback(_key: string, _windowMs: number, _now: number, count: number): number {
    return count
  }

  mirrorResult(): undefined {
    return undefined
  }

  forget(call: StoreCall): void {
    this.fallbackStore?.forget(call)
  }

  fellBack(): void {}

  unavailable(algorithm: Algorithm, limits: readonly LimitSpec[], now: number, allow: boolean): StoreResult {
    return unavailable(algorithm, limits, now, allow)
  }

  misconfigured(): undefined {
    return undefined
  }
}
