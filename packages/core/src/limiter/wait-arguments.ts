/*
 * The arguments of `limiter.wait`: their shape (WaitOptions) and their checks, made before anything is
 * queued so that a wrong call fails at once, naming the argument and the value it got.
 */

import { describeValue, invalidOption, rejectUnknown, TollgateError } from '../errors'
import { isCount, isPlainObject } from '../options/checks'
import type { ScopeOptions } from './scope-options'

/** What `limiter.wait(key, options)` takes: `consume`'s options (with `keys` and `hashTag` for limits with keys of their own), and how long to wait. */
export interface WaitOptions extends ScopeOptions {
  /** The longest the call waits, in ms: a whole number from 0 (one try, as `consume`) to 2147483647. */
  maxWaitMs: number
  /**
   * Units this call uses.
   * @default 1
   */
  cost?: number
  /** Needed only when the limiter's `max` is a function, as `consume`'s third argument. */
  max?: number
  /** Aborting it ends the wait at once with a refused decision; an admission that lands after the abort is refunded. */
  signal?: AbortSignal
}

const WAIT_OPTIONS = ['maxWaitMs', 'cost', 'max', 'signal', 'keys', 'hashTag'] as const

/** The longest delay setTimeout honours: a longer one fires at once (with a warning), which would turn a wait into a loop. */
export const MAX_TIMER_MS = 2 ** 31 - 1

/** The arguments of `limiter.wait`, checked before anything is queued: each problem names the argument and the value. */
export function waitArguments(
  key: unknown,
  options: unknown,
): { cost: number; max: number | undefined; maxWaitMs: number; signal?: AbortSignal; scope: ScopeOptions } {
  if (typeof key !== 'string' || key.length === 0) {
    throw new TollgateError(`Invalid argument "key" of wait(): expected a non-empty string, got ${describeValue(key)}`, 'TG_INVALID_OPTION')
  }
  if (!isPlainObject(options)) {
    throw new TollgateError(
      `Invalid argument "options" of wait(): expected an object with maxWaitMs, got ${describeValue(options)}`,
      'TG_INVALID_OPTION',
    )
  }
  rejectUnknown('wait()', options, WAIT_OPTIONS, (name) => (/^maxwait/i.test(name) ? 'maxWaitMs' : undefined))
  const { maxWaitMs, cost = 1, max, signal, keys, hashTag } = options
  if (!isCount(maxWaitMs) || maxWaitMs > MAX_TIMER_MS) {
    throw invalidOption('maxWaitMs', `a whole number of ms from 0 to ${MAX_TIMER_MS}`, maxWaitMs)
  }
  if (!isCount(cost)) throw invalidOption('cost', 'a whole number ≥ 0', cost)
  if (max !== undefined && !isCount(max)) throw invalidOption('max', 'a whole number ≥ 0', max)
  if (signal !== undefined && !isAbortSignal(signal)) throw invalidOption('signal', 'an AbortSignal', signal)
  return { cost, max, maxWaitMs, signal, scope: { keys, hashTag } as ScopeOptions }
}

function isAbortSignal(value: unknown): value is AbortSignal {
  if (value instanceof AbortSignal) return true
  // A signal of another realm (a vm context, a polyfill) has the same shape.
  const s = value as Partial<AbortSignal> | null
  return typeof s === 'object' && s !== null && typeof s.aborted === 'boolean' && typeof s.addEventListener === 'function'
}
