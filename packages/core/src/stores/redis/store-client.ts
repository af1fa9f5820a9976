import type { RedisTransactionLike } from '../../algorithms/fixed-window'
import { invalidOption, TollgateError } from '../../errors'
import { DirectWriter } from './direct-writer'
import { nodeRedisAdapter } from './node-redis'
import { isNodeRedis } from './node-redis-types'
import { WireConnection } from './own-connection'
import type { ClusterNodeLike } from './script-replies'
import { clusterNodeOf } from './slots'
import { ClientTransactions, type TransactionSender } from './transaction'

/*
 * What RedisStore decides once, at construction, from the client it is given (store.ts): which client it
 * is and how to reach a key's node, refusing anything else by name; and where its transactions go.
 */

/**
 * The part of an ioredis client (`Redis` or `Cluster`) this store uses. Declared structurally so
 * that @tollgate/core never imports ioredis: memory-only users install no Redis client. A node-redis
 * client or Cluster is presented to the store in this shape too (node-redis.ts).
 */
export interface RedisClientLike {
  multi(): RedisTransactionLike
  del(...keys: string[]): Promise<number>
  get(key: string): Promise<string | null>
  set(key: string, value: string, px: 'PX', milliseconds: string): Promise<unknown>
  /** ioredis defineCommand: the scripts run by EVALSHA, falling back to EVAL after a NOSCRIPT. */
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  readonly status?: string
  readonly isCluster?: boolean
  /** ioredis Cluster: the slot map, slot → node keys ("host:port", the master first). */
  readonly slots?: readonly (readonly string[] | undefined)[]
  /** ioredis: closes the connection and, with `true`, reconnects (a reply stream out of step, script-replies.ts). */
  disconnect?(reconnect?: boolean): void
  /** ioredis Cluster: its masters, each reset on its own (script-replies.ts). */
  nodes?(role: 'master'): ClusterNodeLike[]
  /** The node-redis adapter's reset of the connection serving `key` (node-redis.ts). */
  resetConnection?(key: string): void
}

/** RedisStoreOptions.transport. */
export type Transport = 'client' | 'direct' | 'own-connection'
export const TRANSPORTS: readonly Transport[] = ['client', 'direct', 'own-connection']

const CLIENT_METHODS = ['multi', 'del', 'defineCommand'] as const

/**
 * Where the fixed window's transactions go (RedisStoreOptions.transport): through `client.multi()`
 * (transaction.ts), straight onto the client's connection (direct-writer.ts), or on the store's own
 * connection while it is usable (own-connection.ts), else direct. Direct falls back to `client.multi()`
 * whenever something changed `multi` since (a spy, a tracer of batches). Each is a TransactionSender.
 */
export function transactions(client: RedisClientLike, transport: Transport): () => TransactionSender {
  const viaClient = new ClientTransactions(client)
  if (transport === 'client') return () => viaClient
  const direct = DirectWriter.of(client)
  const wire = transport === 'own-connection' ? WireConnection.of(client) : undefined
  if (direct === undefined || (transport === 'own-connection' && wire === undefined)) {
    throw new TollgateError(
      `Invalid RedisStore options: transport "${transport}" needs a standalone ioredis client (a Redis, not a Cluster, ` +
        `connected by host and port or path), and the client given is ${describeClient(client)}; leave transport out ` +
        'to send through the client',
      'TG_INVALID_OPTION',
    )
  }
  if (wire === undefined) return () => (direct.usable ? direct : viaClient)
  return () => (!direct.usable ? viaClient : wire.usable ? wire : direct)
}

function describeClient(client: RedisClientLike): string {
  if (client.isCluster === true) return 'an ioredis Cluster'
  if (typeof (client as { resetConnection?: unknown }).resetConnection === 'function') return 'a node-redis client'
  return 'an ioredis client with sentinels or a custom connector, or a client other than ioredis'
}

/** node-redis 6's `keyPrefix` (a client's, a cluster's own or its defaults'), when one is set. */
function nodeRedisKeyPrefix(client: object): string | undefined {
  type Options = { keyPrefix?: unknown; defaults?: { keyPrefix?: unknown } } | undefined
  const c = client as { options?: Options; _options?: Options }
  for (const options of [c.options, c._options]) {
    for (const prefix of [options?.keyPrefix, options?.defaults?.keyPrefix]) {
      if (typeof prefix === 'string' && prefix.length > 0) return prefix
    }
  }
  return undefined
}

const SUPPORTED_CLIENTS =
  'an ioredis Redis or Cluster, or a node-redis client or cluster (createClient() or createCluster() of the "redis" package)'

/**
 * The client as the store speaks to it, and how to find a key's node, decided once from what the
 * client is: ioredis as it is, node-redis through its adapter (node-redis.ts). Anything else is
 * refused with a message naming the supported clients and, for an object that is almost an ioredis
 * client, what it lacks.
 */
export function checkClient(client: unknown): [RedisClientLike, (storeKey: string) => string] {
  if (client === null || typeof client !== 'object') throw invalidOption('client', SUPPORTED_CLIENTS, client)
  const missing = CLIENT_METHODS.filter((m) => typeof (client as Record<string, unknown>)[m] !== 'function')
  if (missing.length === 0) {
    const ioredis = client as RedisClientLike
    return [ioredis, (key) => (ioredis.isCluster === true ? clusterNodeOf(ioredis.slots, key) : '')]
  }
  if (isNodeRedis(client)) {
    const prefix = nodeRedisKeyPrefix(client)
    if (prefix !== undefined) {
      throw invalidOption(
        'client',
        `a node-redis client without keyPrefix (it prefixes the transactions' commands but not the scripts' keys, so the ` +
          `counts would split over two keyspaces; give the limiter prefix: ${JSON.stringify(prefix)} instead)`,
        client,
      )
    }
    const adapter = nodeRedisAdapter(client)
    return [adapter, (key) => adapter.nodeOf(key)]
  }
  const lacks = missing.length < CLIENT_METHODS.length ? ` (it has no ${missing.map((m) => `${m}()`).join(', ')})` : ''
  throw invalidOption('client', `${SUPPORTED_CLIENTS}${lacks}`, client)
}
