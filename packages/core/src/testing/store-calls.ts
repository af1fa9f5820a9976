import type { AlgorithmName, LimitSpec, Store, StoreCall } from '../types'

/** A limit as the limiter normalises it (`max` units per `windowMs`, `burst` for GCRA, `label` in its policy name). */
export function limitSpec(max: number, windowMs: number, burst = max, label = `${windowMs}ms`): LimitSpec {
  return { max, windowMs, burst, label, policy: { name: `${max}-per-${label}`, limit: max, windowMs } }
}

let calls = 0
/** One store call; each gets a fresh id, as the limiter gives them. */
export function storeCall(algorithm: AlgorithmName, storeKey: string, limits: LimitSpec[], cost: number, now: number): StoreCall {
  calls += 1
  return { algorithm, storeKey, limits, cost, now, id: `test:${calls}` }
}

/** The fixed-window count of `key` in the window containing `now`, read through the protocol (an admit of cost 0). */
export async function countOf(store: Store, key: string, windowMs: number, now: number): Promise<number> {
  const result = await store.admit(storeCall('fixed-window', key, [limitSpec(Number.MAX_SAFE_INTEGER, windowMs)], 0, now))
  return result.values[0]!
}

/** Forgets `key`'s fixed-window count in the window containing `now`. */
export async function resetCount(store: Store, key: string, windowMs: number, now: number): Promise<void> {
  await store.forget(storeCall('fixed-window', key, [limitSpec(1, windowMs)], 0, now))
}
