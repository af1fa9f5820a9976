import { invalidOption } from '../errors'
import type { MaybePromise } from '../types'

/** Validators shared by the limiter's options, the stores' and the adapters', with one error shape. */

export function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

export function optionalFunction<F>(name: string, value: unknown, expected: string): F | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'function') throw invalidOption(name, expected, value)
  return value as F
}

export function countOrFunction<Req>(name: string, value: unknown, fallback: number): number | ((req: Req) => MaybePromise<number>) {
  if (value === undefined) return fallback
  if (typeof value === 'function') return value as (req: Req) => MaybePromise<number>
  if (!isCount(value)) throw invalidOption(name, 'a whole number ≥ 0 or a function of the request returning one', value)
  return value
}

/** Policy names appear inside a structured-field string: printable ASCII without quotes or backslashes. */
export function checkPolicyName(name: string, value: unknown): string | undefined {
  if (value !== undefined && (typeof value !== 'string' || !/^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$/.test(value))) {
    throw invalidOption(name, 'a string of 1 to 64 printable ASCII characters without quotes or backslashes', value)
  }
  return value
}

/** Validates an adapter option that is one of a few strings (e.g. fastify's `hook`), with core's error shape. */
export function adapterChoice<T extends string>(name: string, value: unknown, choices: readonly T[], fallback: T): T {
  if (value === undefined) return fallback
  if (typeof value === 'string' && (choices as readonly string[]).includes(value)) return value as T
  throw invalidOption(name, choices.map((c) => `"${c}"`).join(' or '), value)
}

/** Validates an adapter option that must be a function, with the same error shape as core options. */
export function adapterFunction<F>(name: string, value: unknown): F | undefined {
  return optionalFunction<F>(name, value, 'a function')
}
