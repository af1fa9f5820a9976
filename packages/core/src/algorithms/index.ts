import type { AlgorithmName, StoreCall } from '../types'
import type { Algorithm } from './algorithm'
import { concurrency } from './concurrency'
import { fixedWindow } from './fixed-window'
import { gcra } from './gcra'
import { slidingLog } from './sliding-log'
import { slidingWindow } from './sliding-window'

/**
 * Every algorithm by name, for the Redis store and its scripts (the limiter and the memory store take
 * them from registry.ts, which has only those registered). Marked pure: a bundle without the Redis
 * store leaves it, and through it every algorithm, out.
 */
export const ALGORITHMS: Readonly<Record<AlgorithmName, Algorithm>> = /* @__PURE__ */ Object.freeze({
  'fixed-window': fixedWindow,
  'sliding-window': slidingWindow,
  gcra,
  'sliding-log': slidingLog,
  concurrency,
})

export const ALGORITHM_NAMES = /* @__PURE__ */ Object.keys(ALGORITHMS) as AlgorithmName[]

/** The store keys one call touches, in the order the scripts take them. */
export function keysOf(algorithm: Algorithm, call: StoreCall): string[] {
  const keys: string[] = []
  for (let i = 0; i < call.limits.length; i++) algorithm.keys(call, i, keys)
  return keys
}

/** The store keys a `forget` (reset) deletes: the call's keys, and any an algorithm names besides (forgetKeys). */
export function forgetKeysOf(algorithm: Algorithm, call: StoreCall): string[] {
  const keys: string[] = []
  for (let i = 0; i < call.limits.length; i++) (algorithm.forgetKeys ?? algorithm.keys)(call, i, keys)
  return keys
}

/** The store keys one refund touches: the call's keys, or those the algorithm names for a refund (refundKeys). */
export function refundKeysOf(algorithm: Algorithm, call: StoreCall): string[] {
  const keys: string[] = []
  for (let i = 0; i < call.limits.length; i++) (algorithm.refundKeys ?? algorithm.keys)(call, i, keys)
  return keys
}

/** The store keys one settle touches, in the order the settle scripts take them. */
export function settleKeysOf(algorithm: Algorithm, call: StoreCall): string[] {
  const keys: string[] = []
  for (let i = 0; i < call.limits.length; i++) algorithm.settleKeys(call, i, keys)
  return keys
}

export type { Algorithm } from './algorithm'
export { batchArgs, MAX_BATCH_CALLS, MAX_BATCH_SEQUENCE } from './batch-script'
export type { MemoryTwin, Verdict } from './protocol'
export { argsOf, CALL_RECORD_TTL_MS, callRecordKey, TTL_MARGIN_MS } from './protocol'
