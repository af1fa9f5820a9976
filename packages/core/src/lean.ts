/*
 * @tollgate/core/lean: what index.ts exports, with a Limiter that has only the fixed window and what every
 * limiter reads until an app registers more (registry.ts): `register(gcra, waiting)`. What an app does not
 * register, a bundler leaves out (@tollgate/web builds on it, for runtimes where size is startup time).
 */
export { type Duration, parseDuration } from './duration'
export { TollgateError, type TollgateErrorCode } from './errors'
export {
  allFeatures,
  clientLists,
  concurrency,
  gcra,
  leasing,
  lockouts,
  metrics,
  optionHints,
  remoteStores,
  settling,
  slidingLog,
  slidingWindow,
  waiting,
} from './features'
export { rateLimitHeaders } from './headers'
export { ipKey } from './keys'
export { RedisStore } from './lean-redis-store'
export { type ConsumeOptions, Limiter, type PeekOptions } from './limiter/limiter'
export type { Rejection } from './limiter/response'
export type { WaitOptions } from './limiter/waiting'
export type { LimiterOptions, LimitOptions } from './options/limiter-options'
export { type Feature, register } from './registry'
export { MemoryStore, type MemoryStoreOptions } from './stores/memory-store'
export type { RedisStoreOptions } from './stores/redis/store'
export type { AlgorithmName, Decision, DecisionSource, HeaderStyle, Logger, Policy, Store, StoreErrorPolicy } from './types'
