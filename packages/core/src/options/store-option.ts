import { invalidOption } from '../errors'
import type { AlgorithmName, Logger, Store } from '../types'

/** What every store must offer, whatever the algorithm (`increment` is an optional fast path). */
const STORE_METHODS = ['admit', 'refund', 'forget'] as const

/**
 * The `store` option, or the adapter's default store made with the limiter's logger, checked for the
 * members every algorithm calls: a store that lacks one is named with what it lacks, at construction.
 */
export function parseStore(value: unknown, defaultStore: (logger: Logger) => Store, logger: Logger, algorithm: AlgorithmName): Store {
  const store = value === undefined ? defaultStore(logger) : value
  if (store === null || typeof store !== 'object') {
    throw invalidOption('store', 'a store such as new MemoryStore() or new RedisStore({ client })', store)
  }
  const missing: string[] = STORE_METHODS.filter((m) => typeof (store as Record<string, unknown>)[m] !== 'function')
  if (typeof (store as Partial<Store>).local !== 'boolean') missing.push('local')
  if (missing.length > 0) {
    const what = missing.map((m) => (m === 'local' ? 'a boolean "local"' : `${m}()`)).join(', ')
    throw invalidOption(
      'store',
      `a store with admit(), refund(), forget() and "local" (the algorithm "${algorithm}" needs them; this one lacks ${what})`,
      store,
    )
  }
  return store as Store
}
