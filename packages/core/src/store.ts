/*
 * @tollgate/core/store: what writing a store (or another client's adapter for RedisStore) takes: the
 * store protocol's types, the client shapes RedisStore accepts, and the key constants. An app imports
 * none of it: "@tollgate/core" is what an app uses.
 */
export { formatDuration } from './duration'
export { MAX_KEY_LENGTH, UNKNOWN_CLIENT_KEY } from './keys'
export type { ScopeOptions } from './limiter/request-inputs'
export type { LeaseOption } from './options/lease-option'
export type { NodeRedisClientLike, NodeRedisClusterLike, NodeRedisMultiLike, NodeRedisNodeLike } from './stores/redis/node-redis-types'
export type { RedisClientLike } from './stores/redis/store'
export type { LeaseGrant, LeaseRequest, LimitSpec, MaybePromise, Store, StoreCall, StoreResult } from './types'
