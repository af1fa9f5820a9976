/*
 * @tollgate/core: what an app uses, its Limiter with every feature (lean.ts: one with what an app
 * registers). Writing a store takes "@tollgate/core/store" (store.ts), writing an
 * adapter "@tollgate/core/adapter" (adapter.ts), testing a store "@tollgate/core/testing".
 */
export { type Duration, parseDuration } from './duration'
export { TollgateError, type TollgateErrorCode } from './errors'
export { rateLimitHeaders } from './headers'
export { ipKey } from './keys'
export { Limiter } from './limiter/full'
export type { ConsumeOptions, PeekOptions } from './limiter/limiter'
export type { Rejection } from './limiter/response'
export type { WaitOptions } from './limiter/waiting'
export type { LimiterOptions, LimitOptions } from './options/limiter-options'
export { MemoryStore, type MemoryStoreOptions } from './stores/memory-store'
export { RedisStore, type RedisStoreOptions } from './stores/redis/store'
export type { AlgorithmName, Decision, DecisionSource, HeaderStyle, Logger, Policy, Store, StoreErrorPolicy } from './types'
