import { formatDuration, parseDuration } from '../duration'
import { invalidOption } from '../errors'
import type { LimitSpec, MaybePromise, Policy } from '../types'
import { checkPolicyName, isCount, isPlainObject } from './checks'

/** A limit's own key function (`limits[i].key`). */
export type LimitKey<Req> = (req: Req) => MaybePromise<string>

/** The `limits` option, parsed: the limits, and each one's own key function when any has one. */
export interface ParsedLimits<Req> {
  readonly limits: LimitSpec[]
  /** Undefined when no limit has a key of its own; else one entry per limit, undefined for those without. */
  readonly keys: readonly (LimitKey<Req> | undefined)[] | undefined
}

/**
 * The `limits` option: 1 to 10 limits, each with its policy built once. Limits counted under one key
 * need distinct windows; a limit with a key of its own (`key`) may share a window with others, and
 * then gets a label of its own (`1m.1`, with its index), so two limits never share a count.
 */
export function parseLimits<Req>(value: unknown, takesBurst: boolean, concurrent = false): ParsedLimits<Req> {
  if (!Array.isArray(value) || value.length === 0 || value.length > 10) {
    throw invalidOption('limits', 'an array of 1 to 10 limits like { max: 10, window: "1s" }', value)
  }
  const keys: (LimitKey<Req> | undefined)[] = []
  const labels = new Set<string>()
  const unkeyedWindows = new Set<number>()
  const limits = value.map((limit: unknown, i: number) => {
    const at = `limits[${i}]`
    if (!isPlainObject(limit)) throw invalidOption(at, 'an object like { max: 10, window: "1s" }', limit)
    for (const k of Object.keys(limit))
      if (!['max', 'window', 'burst', 'name', 'key'].includes(k))
        throw invalidOption(`${at}.${k}`, 'one of max, window, burst, name, key', limit[k])
    if (!isCount(limit.max)) throw invalidOption(`${at}.max`, 'a whole number ≥ 0', limit.max)
    if (limit.window === undefined) throw invalidOption(`${at}.window`, 'a duration such as "1s" or "1 hour"', limit.window)
    const b = limit.burst
    if (b !== undefined && (typeof b !== 'number' || !Number.isSafeInteger(b) || b < 1 || !takesBurst)) {
      throw invalidOption(`${at}.burst`, 'a whole number ≥ 1, with algorithm "gcra"', b)
    }
    if (limit.key !== undefined && typeof limit.key !== 'function') {
      throw invalidOption(`${at}.key`, 'a function of the request returning a string', limit.key)
    }
    keys.push(limit.key as LimitKey<Req> | undefined)
    const limitName = checkPolicyName(`${at}.name`, limit.name)
    const windowMs = parseDuration(`${at}.window`, limit.window)
    if (limit.key === undefined) {
      if (unkeyedWindows.has(windowMs)) {
        throw invalidOption(
          'limits',
          'limits with distinct windows (two limits of one window and one key: keep the tighter, or give one a key of its own)',
          value,
        )
      }
      unkeyedWindows.add(windowMs)
    }
    let label = formatDuration(windowMs)
    if (labels.has(label)) label = `${label}.${i}`
    labels.add(label)
    return makeLimit(limit.max, windowMs, b as number | undefined, limitName, false, concurrent, label)
  })
  return { limits, keys: keys.some((k) => k !== undefined) ? keys : undefined }
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
  label = formatDuration(windowMs),
): LimitSpec {
  const policy: Policy = Object.freeze(
    concurrent
      ? { name: name ?? `${max}-concurrent`, limit: max, windowMs, quotaUnit: 'concurrent-requests' as const }
      : { name: name ?? `${max}-per-${formatDuration(windowMs)}`, limit: max, windowMs },
  )
  return Object.freeze({ max, windowMs, burst: burst ?? max, label, policy, ...(keyed ? { keyed } : {}) })
}
