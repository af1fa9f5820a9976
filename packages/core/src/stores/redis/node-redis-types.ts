/*
 * The node-redis shapes RedisStore accepts (node-redis.ts adapts them): structural, so @tollgate/core never
 * imports `redis`; and how a client is told for one.
 */

/** A node-redis transaction (`client.multi()`), v4, v5 or v6: the part RedisStore uses. */
export interface NodeRedisMultiLike {
  incrBy(key: string, increment: number): NodeRedisMultiLike
  pExpire(key: string, milliseconds: number): NodeRedisMultiLike
  zRem(key: string, members: string[]): NodeRedisMultiLike
  exec(): Promise<unknown>
}

/** A node-redis client (`createClient()`, v4, v5 or v6), connected by its owner with `await client.connect()`. */
export interface NodeRedisClientLike {
  readonly isOpen: boolean
  readonly isReady: boolean
  sendCommand(args: string[]): Promise<unknown>
  multi(): NodeRedisMultiLike
  on(event: string, listener: (...args: unknown[]) => void): unknown
}

/** A node in a node-redis Cluster's slot map (`cluster.masters`, `cluster.slots[slot].master`). */
export interface NodeRedisNodeLike {
  readonly host: string
  readonly port: number
}

/** A node-redis Cluster (`createCluster({ rootNodes })`, v4, v5 or v6), connected by its owner. */
export interface NodeRedisClusterLike {
  readonly isOpen: boolean
  readonly masters: readonly NodeRedisNodeLike[]
  readonly slots: ReadonlyArray<{ readonly master: NodeRedisNodeLike } | undefined>
  sendCommand(firstKey: string | undefined, isReadonly: boolean | undefined, args: string[]): Promise<unknown>
  multi(): NodeRedisMultiLike
  nodeClient(node: never): Promise<NodeRedisClientLike> | NodeRedisClientLike
  on(event: string, listener: (...args: unknown[]) => void): unknown
}

export type AnyNodeRedis = NodeRedisClientLike | NodeRedisClusterLike

function isFunction(value: unknown): boolean {
  return typeof value === 'function'
}

/** A node-redis Cluster: `sendCommand`, `masters` and `nodeClient`. */
export function isNodeRedisCluster(client: object): client is NodeRedisClusterLike {
  const c = client as Record<string, unknown>
  return isFunction(c.sendCommand) && isFunction(c.multi) && isFunction(c.nodeClient) && 'masters' in client && 'isOpen' in client
}

/** A node-redis client or Cluster: `sendCommand`, `multi` and `isOpen` (ioredis has no `isOpen`). */
export function isNodeRedis(client: object): client is AnyNodeRedis {
  const c = client as Record<string, unknown>
  return isFunction(c.sendCommand) && isFunction(c.multi) && 'isOpen' in client
}
