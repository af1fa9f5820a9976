import type { Algorithm } from '../algorithms'
import { describeValue } from '../errors'
import type { Config } from '../options/parse-options'
import { MemoryStore } from '../stores/memory-store'
import type { LimitSpec, StoreResult } from '../types'

/** After a store failure, requests go straight to the failure policy for this long before the store is tried again. */
const STORE_RETRY_MS = 1000

/**
 * What a limiter does when its store fails or misses its deadline (`onStoreError`): a circuit that
 * skips the store for a while after a failure, the local fallback store, the numbers for "allow" and
 * "deny" (asked of the algorithm), one log line when an outage starts and one when it ends. It returns
 * stores and numbers, never decisions: counting.ts turns them into decisions on its one path.
 */
export class Resilience {
  private downUntil = 0
  /** True from a failure until the store answers again. */
  degraded = false
  private fallbackStore: MemoryStore | undefined

  constructor(
    private readonly config: Config<unknown>,
    private readonly emit: (event: string, value?: unknown) => void,
  ) {}

  /** True while the circuit is open: decide without asking the store. */
  isOpen(now: number): boolean {
    return now < this.downUntil
  }

  failed(error: unknown, now: number): void {
    const c = this.config
    this.downUntil = now + STORE_RETRY_MS
    if (!this.degraded) {
      this.degraded = true
      c.logger.error(
        `Tollgate: the store failed (${error instanceof Error ? error.message : describeValue(error)}); applying onStoreError "${c.onStoreError}" until it answers again`,
        error,
      )
    }
    this.emit('storeError', error)
  }

  /** The store answered after an outage. */
  recovered(): void {
    this.degraded = false
    this.downUntil = 0
    this.config.logger.warn('Tollgate: the store is answering again; decisions come from it again')
    this.emit('recover')
  }

  /** The local store that keeps limiting during an outage (`onStoreError: "fallback"`). */
  get fallback(): MemoryStore {
    this.fallbackStore ??= new MemoryStore()
    return this.fallbackStore
  }

  /** The store's answer under `onStoreError: "allow"` or `"deny"`: a full or an exhausted quota. */
  unavailable(algorithm: Algorithm, limits: readonly LimitSpec[], now: number, allow: boolean): StoreResult {
    const values: number[] = []
    for (const limit of limits) algorithm.unavailable(limit, now, allow, values)
    return { allowed: allow, values }
  }
}
