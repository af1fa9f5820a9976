import { formatDuration, parseDuration } from '../duration'
import { invalidOption } from '../errors'
import type { LimitSpec, Policy } from '../types'
import { checkPolicyName, isCount, isPlainObject } from './checks'

/** The `limits` option: 1 to 10 limits of distinct windows, each with its policy built once. */
export function parseLimits(value: unknown, takesBurst: boolean, concurrent = false): LimitSpec[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > 10) {
    throw invalidOption('limits', 'an array of 1 to 10 limits like { max: 10, window: "1s" }', value)
  }
  const limits = value.map((limit: unknown, i: number) => {
    const at = `limits[${i}]`
    if (!isPlainObject(limit)) throw invalidOption(at, 'an object like { max: 10, window: "1s" }', limit)
    for (const k of Object.keys(limit))
      if (!['max', 'window', 'burst', 'name'].includes(k)) throw invalidOption(`${at}.${k}`, 'one of max, window, burst, name', limit[k])
    if (!isCount(limit.max)) throw invalidOption(`${at}.max`, 'a whole number ≥ 0', limit.max)
    if (limit.window === undefined) throw invalidOption(`${at}.window`, 'a duration such as "1s" or "1 hour"', limit.window)
    const b = limit.burst
    if (b !== undefined && (typeof b !== 'number' || !Number.isSafeInteger(b) || b < 1 || !takesBurst)) {
      throw invalidOption(`${at}.burst`, 'a whole number ≥ 1, with algorithm "gcra"', b)
    }
    const limitName = checkPolicyName(`${at}.name`, limit.name)
    return makeLimit(limit.max, parseDuration(`${at}.window`, limit.window), b as number | undefined, limitName, false, concurrent)
  })
  if (new Set(limits.map((l) => l.windowMs)).size !== limits.length) {
    throw invalidOption('limits', 'limits with distinct windows (two limits of one window: keep the tighter)', value)
  }
  return limits
}

/**
 * A limit, normalised, with its policy (and so its header fragments) built once. A `concurrent` limit
 * (algorithm "concurrency") counts requests in flight: its policy says so in its name and quota unit.
 */
export function makeLimit(
  max: number,
  windowMs: number,
  burst: number | undefined,
  name: string | undefined,
  keyed = false,
  concurrent = false,
): LimitSpec {
  const label = formatDuration(windowMs)
  const policy: Policy = Object.freeze(
    concurrent
      ? { name: name ?? `${max}-concurrent`, limit: max, windowMs, quotaUnit: 'concurrent-requests' as const }
      : { name: name ?? `${max}-per-${label}`, limit: max, windowMs },
  )
  return Object.freeze({ max, windowMs, burst: burst ?? max, label, policy, ...(keyed ? { keyed } : {}) })
}
