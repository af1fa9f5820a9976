import { createHash } from 'node:crypto'
import { ALGORITHMS, type AlgorithmName, type LimitSpec, makeLimit } from './algorithms'
import { parseDuration } from './duration'
import { invalidOption, TollgateError } from './errors'
import { MemoryStore } from './memory-store'
import type { MaybePromise, Store } from './store'
import type { Decision, HeaderStyle, LimiterOptions, Logger, StoreErrorPolicy } from './types'

/** Options after validation: every default filled in, frozen, never re-checked per request. */
export interface Config<Req> {
  readonly max: number | ((req: Req) => MaybePromise<number>)
  readonly windowMs: number
  readonly key: ((req: Req) => MaybePromise<string>) | undefined
  readonly prefix: string
  readonly store: Store
  readonly cost: number | ((req: Req) => MaybePromise<number>)
  readonly skip: ((req: Req) => MaybePromise<boolean>) | undefined
  readonly headers: HeaderStyle | false
  readonly legacyHeaders: boolean
  readonly statusCode: number
  readonly message: LimiterOptions<Req>['message']
  readonly ipv6Subnet: number | false
  readonly onStoreError: StoreErrorPolicy
  readonly name: string | undefined
  readonly logger: Logger
  readonly clock: () => number
  readonly algorithm: AlgorithmName
  /** Set when the `limits` option was given; otherwise the single limit comes from max and window. */
  readonly limits: readonly LimitSpec[] | undefined
  readonly burst: number | undefined
  readonly skipFailedRequests: boolean
  readonly skipSuccessfulRequests: boolean
  readonly requestWasSuccessful: LimiterOptions<Req>['requestWasSuccessful']
  readonly shadow: boolean
}

const CORE_KEYS = [
  'max',
  'window',
  'key',
  'prefix',
  'store',
  'cost',
  'skip',
  'headers',
  'legacyHeaders',
  'statusCode',
  'message',
  'ipv6Subnet',
  'onStoreError',
  'name',
  'logger',
  'clock',
  'algorithm',
  'limits',
  'burst',
  'skipFailedRequests',
  'skipSuccessfulRequests',
  'requestWasSuccessful',
  'shadow',
] as const

const HEADER_STYLES = ['draft-6', 'draft-7', 'draft-8']
const POLICIES = ['fallback', 'allow', 'deny']

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

function optionalFunction<F>(name: string, value: unknown, expected: string): F | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'function') throw invalidOption(name, expected, value)
  return value as F
}

function countOrFunction<Req>(name: string, value: unknown, fallback: number): number | ((req: Req) => MaybePromise<number>) {
  if (value === undefined) return fallback
  if (typeof value === 'function') return value as (req: Req) => MaybePromise<number>
  if (!isCount(value)) throw invalidOption(name, 'a whole number ≥ 0 or a function of the request returning one', value)
  return value
}

/**
 * Validates options once, at construction. `undefined` means "use the default"; an unknown key is an
 * error (a typo such as `windowMs` must not silently become the default); the caller's object is
 * never mutated. `adapterKeys` are options an adapter reads itself (e.g. Express's `handler`).
 */
export function parseOptions<Req>(options: LimiterOptions<Req> | undefined, adapterKeys: readonly string[] = []): Config<Req> {
  const o = (options ?? {}) as Record<string, unknown>
  if (!isPlainObject(o)) throw invalidOption('options', 'an object of options', options)
  const known = new Set<string>([...CORE_KEYS, ...adapterKeys])
  for (const name of Object.keys(o)) {
    if (!known.has(name)) {
      const hint = [...known].find(
        (k) => k.toLowerCase() === name.toLowerCase() || (name.toLowerCase().startsWith(k.toLowerCase()) && k.length > 2),
      )
      throw new TollgateError(
        `Unknown option "${name}"${hint ? ` (did you mean "${hint}"?)` : ''}; known options: ${[...known].join(', ')}`,
        'TG_UNKNOWN_OPTION',
      )
    }
  }

  const windowMs = o.window === undefined ? 1000 : parseDuration('window', o.window)

  const prefix = o.prefix === undefined ? 'tg:' : o.prefix
  // Braces would move the Redis Cluster hash tag off the client key, so one client's windows
  // could land in different slots.
  if (typeof prefix !== 'string' || prefix.length > 128 || /[{}\s]/.test(prefix)) {
    throw invalidOption('prefix', 'a string of at most 128 characters without braces or spaces', prefix)
  }

  const store = o.store === undefined ? new MemoryStore() : o.store
  const s = store as Partial<Store>
  if (
    s === null ||
    typeof s !== 'object' ||
    typeof s.increment !== 'function' ||
    typeof s.get !== 'function' ||
    typeof s.reset !== 'function' ||
    typeof s.local !== 'boolean'
  ) {
    throw invalidOption('store', 'a store such as new MemoryStore() or new RedisStore({ client })', store)
  }

  let headers: HeaderStyle | false
  if (o.headers === undefined || o.headers === true) headers = 'draft-8'
  else if (o.headers === false) headers = false
  else if (typeof o.headers === 'string' && HEADER_STYLES.includes(o.headers)) headers = o.headers as HeaderStyle
  else throw invalidOption('headers', 'true, false, "draft-8", "draft-7" or "draft-6"', o.headers)

  if (o.legacyHeaders !== undefined && typeof o.legacyHeaders !== 'boolean')
    throw invalidOption('legacyHeaders', 'true or false', o.legacyHeaders)

  const statusCode = o.statusCode === undefined ? 429 : o.statusCode
  if (typeof statusCode !== 'number' || !Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599) {
    throw invalidOption('statusCode', 'an HTTP error status from 400 to 599', statusCode)
  }

  const message = o.message
  if (message !== undefined && typeof message !== 'string' && typeof message !== 'function' && !isPlainObject(message)) {
    throw invalidOption('message', 'a string, a plain object, or a function returning one', message)
  }

  const ipv6Subnet = o.ipv6Subnet === undefined ? 56 : o.ipv6Subnet
  if (ipv6Subnet !== false && (typeof ipv6Subnet !== 'number' || !Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128)) {
    throw invalidOption('ipv6Subnet', 'a prefix length from 1 to 128, or false', ipv6Subnet)
  }

  const onStoreError = o.onStoreError === undefined ? 'fallback' : o.onStoreError
  if (typeof onStoreError !== 'string' || !POLICIES.includes(onStoreError)) {
    throw invalidOption('onStoreError', '"fallback", "allow" or "deny"', onStoreError)
  }

  // Policy names appear inside a structured-field string: printable ASCII without quotes or backslashes.
  if (o.name !== undefined && (typeof o.name !== 'string' || !/^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$/.test(o.name))) {
    throw invalidOption('name', 'a string of 1 to 64 printable ASCII characters without quotes or backslashes', o.name)
  }

  const logger = o.logger === undefined ? console : o.logger
  const l = logger as Partial<Logger>
  if (l === null || typeof l !== 'object' || typeof l.warn !== 'function' || typeof l.error !== 'function') {
    throw invalidOption('logger', 'an object with warn() and error() methods, such as console', logger)
  }

  const algorithm = o.algorithm === undefined ? 'fixed-window' : o.algorithm
  if (typeof algorithm !== 'string' || !ALGORITHMS.includes(algorithm as AlgorithmName)) {
    throw invalidOption('algorithm', ALGORITHMS.map((a) => `"${a}"`).join(', '), algorithm)
  }
  const burst = o.burst
  if (burst !== undefined) {
    if (typeof burst !== 'number' || !Number.isSafeInteger(burst) || burst < 1) throw invalidOption('burst', 'a whole number ≥ 1', burst)
    if (algorithm !== 'gcra') throw invalidOption('burst', 'no burst unless algorithm is "gcra"', burst)
  }
  let limits: LimitSpec[] | undefined
  if (o.limits !== undefined) {
    if (!Array.isArray(o.limits) || o.limits.length === 0 || o.limits.length > 10) {
      throw invalidOption('limits', 'an array of 1 to 10 limits like { max: 10, window: "1s" }', o.limits)
    }
    if (o.max !== undefined || o.window !== undefined) {
      throw invalidOption('limits', 'limits without max or window (give every limit its own max and window)', o.limits)
    }
    limits = o.limits.map((limit: unknown, i: number) => {
      const name = `limits[${i}]`
      if (!isPlainObject(limit)) throw invalidOption(name, 'an object like { max: 10, window: "1s" }', limit)
      for (const k of Object.keys(limit))
        if (!['max', 'window', 'burst', 'name'].includes(k))
          throw invalidOption(`${name}.${k}`, 'one of max, window, burst, name', limit[k])
      if (!isCount(limit.max)) throw invalidOption(`${name}.max`, 'a whole number ≥ 0', limit.max)
      if (limit.window === undefined) throw invalidOption(`${name}.window`, 'a duration such as "1s" or "1 hour"', limit.window)
      const b = limit.burst
      if (b !== undefined && (typeof b !== 'number' || !Number.isSafeInteger(b) || b < 1 || algorithm !== 'gcra')) {
        throw invalidOption(`${name}.burst`, 'a whole number ≥ 1, with algorithm "gcra"', b)
      }
      if (limit.name !== undefined && (typeof limit.name !== 'string' || !/^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$/.test(limit.name))) {
        throw invalidOption(`${name}.name`, 'a string of 1 to 64 printable ASCII characters without quotes or backslashes', limit.name)
      }
      return makeLimit(limit.max, parseDuration(`${name}.window`, limit.window), b as number | undefined, limit.name as string | undefined)
    })
    if (new Set(limits.map((l) => l.windowMs)).size !== limits.length) {
      throw invalidOption('limits', 'limits with distinct windows (two limits of one window: keep the tighter)', o.limits)
    }
  }
  for (const flag of ['skipFailedRequests', 'skipSuccessfulRequests', 'shadow'] as const) {
    if (o[flag] !== undefined && typeof o[flag] !== 'boolean') throw invalidOption(flag, 'true or false', o[flag])
  }

  return Object.freeze({
    algorithm: algorithm as AlgorithmName,
    limits,
    burst: burst as number | undefined,
    skipFailedRequests: (o.skipFailedRequests as boolean | undefined) ?? false,
    skipSuccessfulRequests: (o.skipSuccessfulRequests as boolean | undefined) ?? false,
    requestWasSuccessful: optionalFunction<LimiterOptions<Req>['requestWasSuccessful']>(
      'requestWasSuccessful',
      o.requestWasSuccessful,
      'a function of the request and response returning true when it succeeded',
    ),
    shadow: (o.shadow as boolean | undefined) ?? false,
    max: countOrFunction<Req>('max', o.max, 10),
    windowMs,
    key: optionalFunction<(req: Req) => MaybePromise<string>>('key', o.key, 'a function of the request returning a string'),
    prefix,
    store: store as Store,
    cost: countOrFunction<Req>('cost', o.cost, 1),
    skip: optionalFunction<(req: Req) => MaybePromise<boolean>>('skip', o.skip, 'a function of the request returning true to skip it'),
    headers,
    legacyHeaders: (o.legacyHeaders as boolean | undefined) ?? false,
    statusCode,
    message: message as LimiterOptions<Req>['message'],
    ipv6Subnet: ipv6Subnet as number | false,
    onStoreError: onStoreError as StoreErrorPolicy,
    name: o.name as string | undefined,
    logger: logger as Logger,
    clock: optionalFunction<() => number>('clock', o.clock, 'a function returning the time in epoch ms') ?? Date.now,
  })
}

/** Validates an adapter option that is one of a few strings (e.g. fastify's `hook`), with core's error shape. */
export function adapterChoice<T extends string>(name: string, value: unknown, choices: readonly T[], fallback: T): T {
  if (value === undefined) return fallback
  if (typeof value === 'string' && (choices as readonly string[]).includes(value)) return value as T
  throw invalidOption(name, choices.map((c) => `"${c}"`).join(' or '), value)
}

/**
 * Key prefix for a limit nested under another (a route's own limit under a plugin's): the parent's
 * prefix plus the name, hashed when the name would make an unusable prefix, so limits that share a
 * store never share counts.
 */
export function subPrefix(base: string, name: string): string {
  if (/^[^{}\s]+$/.test(name) && base.length + name.length < 128) return `${base}${name}:`
  return `${base}${createHash('sha256').update(name).digest('base64url').slice(0, 16)}:`
}

/**
 * Options that define a limit (how many, over what, under which name and key prefix, enforced or
 * not) rather than how to count: a limit nested under another (fastify's route `config.rateLimit`)
 * never inherits these from its parent.
 */
export const LIMIT_DEFINING_KEYS = ['max', 'window', 'limits', 'burst', 'name', 'prefix', 'shadow'] as const

/**
 * Options of a limit nested under a parent's (a route's own limit under a plugin's): the parent's
 * way of counting (store, key, algorithm, headers...) with the nested limit's own numbers, and its
 * own key prefix (`scope` under the parent's prefix), so the two never add into one count. `option`
 * names the nested limit's option in the error thrown when `own` is not an object of options.
 */
export function nestedOptions<O extends object>(
  parent: O | undefined,
  own: unknown,
  nest: { parentPrefix: string; scope: string; option: string },
): O {
  if (!isPlainObject(own)) throw invalidOption(nest.option, 'an object of options or false', own)
  const merged: Record<string, unknown> = { ...parent }
  for (const key of LIMIT_DEFINING_KEYS) delete merged[key]
  Object.assign(merged, own)
  merged.prefix ??= subPrefix(nest.parentPrefix, nest.scope)
  return merged as O
}

/** Validates an adapter option that must be a function, with the same error shape as core options. */
export function adapterFunction<F>(name: string, value: unknown): F | undefined {
  return optionalFunction<F>(name, value, 'a function')
}

export type { Decision }
