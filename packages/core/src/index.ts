/*
 * @tollgate/core: the public API for apps and store authors. Adapter packages build on
 * "@tollgate/core/adapter" (adapter.ts) as well.
 */
export { type Duration, formatDuration, parseDuration } from './duration'
export { TollgateError, type TollgateErrorCode } from './errors'
export { rateLimitHeaders } from './headers'
export { ipKey, MAX_KEY_LENGTH, UNKNOWN_CLIENT_KEY } from './keys'
export { type ConsumeOptions, Limiter, type PeekOptions } from './limiter/limiter'
export type { ScopeOptions } from './limiter/request-inputs'
export type { Rejection } from './limiter/response'
export type { WaitOptions } from './limiter/waiting'
export type { LeaseOption } from './options/lease-option'
export type { LimiterOptions, LimitOptions } from './options/limiter-options'
export { MemoryStore, type MemoryStoreOptions } from './stores/memory-store'
export type { NodeRedisClientLike, NodeRedisClusterLike, NodeRedisMultiLike, NodeRedisNodeLike } from './stores/redis/node-redis'
export { type RedisClientLike, RedisStore, type RedisStoreOptions } from './stores/redis/store'
export type {
  AdapterHooks,
  AlgorithmName,
  Decision,
  DecisionSource,
  HeaderStyle,
  LeaseGrant,
  LeaseRequest,
  LimitSpec,
  Logger,
  MaybePromise,
  Policy,
  Store,
  StoreCall,
  StoreErrorPolicy,
  StoreResult,
} from './types'
