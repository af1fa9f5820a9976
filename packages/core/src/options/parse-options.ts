import type { ClientList } from '../client-lists'
import { type Duration, parseDuration } from '../duration'
import { invalidOption, rejectUnknown, TollgateError } from '../errors'
import { isPrefix } from '../keys'
import { KIT, notRegistered } from '../registry'
import type { AlgorithmName, HeaderStyle, LimitSpec, Logger, MaybePromise, MeterProviderLike, Store, StoreErrorPolicy } from '../types'
import { CONCURRENCY_WINDOW_MS, parseAlgorithm } from './algorithm-option'
import { checkPolicyName, countOrFunction, isPlainObject, optionalFunction } from './checks'
import type { LeaseConfig, parseLease } from './lease-option'
import type { LimiterOptions } from './limiter-options'
import { type LimitKey, parseLimits } from './limits'
import type { guessOption } from './peer-names'
import { parseResponseOptions } from './response-options'
import { parseStore } from './store-option'

/** What parsing reads of the leasing feature's slot (features.ts writes it, checked against this). */
export interface LeaseParsing {
  readonly parse: typeof parseLease
}

/** Options after validation: every default filled in, frozen, never re-checked per request. */
export interface Config<Req> {
  readonly max: number | ((req: Req) => MaybePromise<number>)
  readonly windowMs: number
  /** Set when `window` is a function of the request; `windowMs` is then the default, 1 s. */
  readonly window: ((req: Req) => MaybePromise<Duration>) | undefined
  readonly key: ((req: Req) => MaybePromise<string>) | undefined
  readonly prefix: string
  readonly store: Store
  readonly cost: number | ((req: Req) => MaybePromise<number>)
  readonly skip: ((req: Req) => MaybePromise<boolean>) | undefined
  readonly allowList: ClientList | ((req: Req) => MaybePromise<boolean>) | undefined
  readonly denyList: ClientList | ((req: Req) => MaybePromise<boolean>) | undefined
  readonly denyStatusCode: number
  readonly denyMessage: LimiterOptions<Req>['denyMessage']
  readonly headers: HeaderStyle | false
  readonly legacyHeaders: boolean
  readonly headersOn: 'all' | 'allowed' | 'refused'
  readonly refusalHeaders: boolean
  readonly statusCode: number
  readonly message: LimiterOptions<Req>['message']
  readonly ipv6Subnet: number | false
  readonly onStoreError: StoreErrorPolicy
  readonly name: string | undefined
  /** Undefined: the global MeterProvider, when `@opentelemetry/api` is installed. */
  readonly meterProvider: MeterProviderLike | undefined
  readonly logger: Logger
  readonly clock: () => number
  readonly algorithm: AlgorithmName
  /** Set when the `limits` option was given; otherwise the single limit comes from max and window. */
  readonly limits: readonly LimitSpec[] | undefined
  /** Set when a limit has a key of its own: one entry per limit, undefined for a limit counted under the client key. */
  readonly limitKeys: readonly (LimitKey<Req> | undefined)[] | undefined
  /** The Redis Cluster hash tag of a request's keys (only with `limitKeys`). */
  readonly hashTag: LimitKey<Req> | undefined
  readonly burst: number | undefined
  readonly skipFailedRequests: boolean
  readonly skipSuccessfulRequests: boolean
  readonly requestWasSuccessful: LimiterOptions<Req>['requestWasSuccessful']
  /** Set when requests are settled to their actual cost after the response. */
  readonly actualCost: LimiterOptions<Req>['actualCost']
  readonly shadow: boolean
  /** 0 when there is no lockout. */
  readonly blockMs: number
  /** Set with the `lease` option on a remote store (lease-option.ts); undefined otherwise. */
  readonly lease: LeaseConfig | undefined
}

/** Every option of LimiterOptions, checked complete by the compiler. */
const OPTION_KEYS = {
  max: true,
  window: true,
  key: true,
  prefix: true,
  store: true,
  cost: true,
  skip: true,
  allowList: true,
  denyList: true,
  denyStatusCode: true,
  denyMessage: true,
  headers: true,
  legacyHeaders: true,
  headersOn: true,
  refusalHeaders: true,
  statusCode: true,
  message: true,
  ipv6Subnet: true,
  onStoreError: true,
  name: true,
  meterProvider: true,
  logger: true,
  clock: true,
  algorithm: true,
  limits: true,
  burst: true,
  skipFailedRequests: true,
  skipSuccessfulRequests: true,
  requestWasSuccessful: true,
  actualCost: true,
  shadow: true,
  blockDuration: true,
  hashTag: true,
  lease: true,
} satisfies Record<keyof LimiterOptions, true>
const CORE_KEYS = Object.keys(OPTION_KEYS)

const POLICIES = ['fallback', 'allow', 'deny']

/**
 * Validates options once, at construction. `undefined` means "use the default"; an unknown key is an
 * error (a typo such as `windowMs` must not silently become the default); the caller's object is
 * never mutated. `adapterKeys` are options an adapter reads itself (e.g. Express's `handler`).
 */
export function parseOptions<Req>(
  options: LimiterOptions<Req> | undefined,
  adapterKeys: readonly string[],
  defaultStore: (logger: Logger) => Store,
): Config<Req> {
  const o = (options ?? {}) as Record<string, unknown>
  if (!isPlainObject(o)) throw invalidOption('options', 'an object of options', options)
  const known = [...CORE_KEYS, ...adapterKeys]
  // The hints for an option carried over from another limiter come with the optionHints feature.
  const hints = KIT.optionHints as typeof guessOption | undefined
  rejectUnknown('', o, known, hints && ((name) => hints(name, known)))

  const windowFn = typeof o.window === 'function' ? (o.window as (req: Req) => MaybePromise<Duration>) : undefined
  const windowMs = o.window === undefined || windowFn !== undefined ? 1000 : parseDuration('window', o.window)

  const prefix = o.prefix === undefined ? 'tg:' : o.prefix
  if (!isPrefix(prefix)) {
    throw invalidOption('prefix', 'a string of at most 128 characters without braces or spaces', prefix)
  }

  const response = parseResponseOptions<Req>(o)

  const ipv6Subnet = o.ipv6Subnet === undefined ? 56 : o.ipv6Subnet
  if (ipv6Subnet !== false && (typeof ipv6Subnet !== 'number' || !Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128)) {
    throw invalidOption('ipv6Subnet', 'a prefix length from 1 to 128, or false', ipv6Subnet)
  }

  const onStoreError = o.onStoreError === undefined ? 'fallback' : o.onStoreError
  if (typeof onStoreError !== 'string' || !POLICIES.includes(onStoreError)) {
    throw invalidOption('onStoreError', '"fallback", "allow" or "deny"', onStoreError)
  }

  const name = checkPolicyName('name', o.name)

  // Checked by the metrics feature, when the limiter is made (telemetry.ts).
  const meterProvider = o.meterProvider
  if (meterProvider !== undefined && KIT.Telemetry === undefined) throw notRegistered('meterProvider', 'a MeterProvider', 'metrics')

  const logger = o.logger === undefined ? console : o.logger
  const l = logger as Partial<Logger>
  if (l === null || typeof l !== 'object' || typeof l.warn !== 'function' || typeof l.error !== 'function') {
    throw invalidOption('logger', 'an object with warn() and error() methods, such as console', logger)
  }

  const { algorithm, takesBurst, releases, burst } = parseAlgorithm(o)

  const store = parseStore(o.store, defaultStore, logger as Logger, algorithm)
  if (o.limits !== undefined && (o.max !== undefined || o.window !== undefined)) {
    throw invalidOption('limits', 'limits without max or window (give every limit its own max and window)', o.limits)
  }
  const parsed = o.limits === undefined ? undefined : parseLimits<Req>(o.limits, takesBurst, releases)
  const limitKeys = parsed?.keys
  const hashTag = optionalFunction<LimitKey<Req>>('hashTag', o.hashTag, 'a function of the request returning a string')
  if (hashTag !== undefined && limitKeys === undefined) {
    throw invalidOption('hashTag', 'no hashTag unless a limit has a key of its own (limits[i].key)', o.hashTag)
  }
  if (limitKeys !== undefined) {
    // A request's keys are many; a block is one key's. Rather than guess which key a block belongs to,
    // the lockout is not offered with per-limit keys.
    if (o.blockDuration !== undefined)
      throw invalidOption('blockDuration', 'no blockDuration with limits that have keys of their own', o.blockDuration)
    // Per-limit keys without a shared hash tag on a Redis Cluster are refused with the remote store's
    // failure policy, when the limiter is made (resilience.ts, StoreResilience).
  }
  for (const flag of ['skipFailedRequests', 'skipSuccessfulRequests', 'shadow'] as const) {
    if (o[flag] !== undefined && typeof o[flag] !== 'boolean') throw invalidOption(flag, 'true or false', o[flag])
  }

  const actualCost = optionalFunction<LimiterOptions<Req>['actualCost']>(
    'actualCost',
    o.actualCost,
    'a function of the request and response returning the units the request really used',
  )
  if (actualCost !== undefined && KIT.Settling === undefined) throw notRegistered('actualCost', 'a settle', 'settling')
  if (actualCost !== undefined && typeof store.settle !== 'function') {
    throw new TollgateError(
      'Invalid option "actualCost": the store has no settle(), so a request cannot be settled to its actual cost; use a store with settle() (MemoryStore and RedisStore have it), or leave actualCost out',
      'TG_INVALID_OPTION',
    )
  }

  const leasing = KIT.leasing as LeaseParsing | undefined
  if (leasing === undefined && o.lease !== undefined && o.lease !== false) throw notRegistered('lease', 'a lease', 'leasing')
  const lease = leasing?.parse(o, algorithm, store)
  const blockMs = o.blockDuration === undefined ? 0 : parseDuration('blockDuration', o.blockDuration)
  if (blockMs > 0 && KIT.Lockout === undefined) throw notRegistered('blockDuration', 'a block', 'lockouts')

  return Object.freeze({
    lease,
    actualCost,
    algorithm,
    limits: parsed?.limits,
    limitKeys,
    hashTag,
    burst,
    skipFailedRequests: (o.skipFailedRequests as boolean | undefined) ?? false,
    skipSuccessfulRequests: (o.skipSuccessfulRequests as boolean | undefined) ?? false,
    requestWasSuccessful: optionalFunction<LimiterOptions<Req>['requestWasSuccessful']>(
      'requestWasSuccessful',
      o.requestWasSuccessful,
      'a function of the request and response returning true when it succeeded',
    ),
    shadow: (o.shadow as boolean | undefined) ?? false,
    blockMs,
    max: countOrFunction<Req>('max', o.max, 10),
    windowMs: releases && o.window === undefined ? CONCURRENCY_WINDOW_MS : windowMs,
    window: windowFn,
    key: optionalFunction<(req: Req) => MaybePromise<string>>('key', o.key, 'a function of the request returning a string'),
    prefix,
    store,
    cost: countOrFunction<Req>('cost', o.cost, 1),
    allowList: clientList<Req>('allowList', o.allowList),
    denyList: clientList<Req>('denyList', o.denyList),
    denyStatusCode: response.denyStatusCode,
    denyMessage: o.denyMessage as LimiterOptions<Req>['denyMessage'],
    skip: optionalFunction<(req: Req) => MaybePromise<boolean>>('skip', o.skip, 'a function of the request returning true to skip it'),
    headers: response.headers,
    legacyHeaders: (o.legacyHeaders as boolean | undefined) ?? false,
    headersOn: response.headersOn,
    refusalHeaders: (o.refusalHeaders as boolean | undefined) ?? true,
    statusCode: response.statusCode,
    message: response.message,
    ipv6Subnet: ipv6Subnet as number | false,
    onStoreError: onStoreError as StoreErrorPolicy,
    name,
    meterProvider: meterProvider as MeterProviderLike | undefined,
    logger: logger as Logger,
    clock: wholeMs(optionalFunction<() => number>('clock', o.clock, 'a function returning the time in epoch ms')),
  })
}

/**
 * The limiter's clock in whole ms. Redis takes only integer TTLs (PEXPIRE, SET PX): a TTL computed from a
 * clock with a fraction (performance.now() based, say) would be refused, and a refused PEXPIRE in the
 * fixed window's transaction used to leave its key without one. Date.now is whole already.
 */
function wholeMs(clock: (() => number) | undefined): () => number {
  if (clock === undefined) return Date.now
  return () => Math.floor(clock())
}

function clientList<Req>(name: string, value: unknown): ClientList | ((req: Req) => MaybePromise<boolean>) | undefined {
  if (value === undefined) return undefined
  if (typeof value === 'function') return value as (req: Req) => MaybePromise<boolean>
  const List = KIT.ClientList as typeof ClientList | undefined
  if (List === undefined) throw notRegistered(name, 'a list of addresses and ranges', 'clientLists')
  return new List(name, value)
}
