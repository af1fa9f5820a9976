import type { FixedWindowCommand, RedisTransactionLike } from '../../algorithms/fixed-window'
import type { AnyNodeRedis, NodeRedisClusterLike, NodeRedisNodeLike } from './node-redis-types'

/*
 * The store's transactions on node-redis (node-redis.ts), the fixed window's and a turn's removals by call
 * id: ioredis's transaction shape over a node-redis MULTI, its replies as ioredis's pairs, and on a Cluster, sent to the node an ASK names.
 */

/** node-redis's MULTI replies as ioredis's [error, value] pairs; a MultiErrorReply carries every reply (`replies`). */
function pairs(replies: unknown): Array<[Error | null, unknown]> | null {
  if (replies === null) return null
  const list = Array.isArray(replies) ? replies : [replies]
  return list.map((reply): [Error | null, unknown] => (reply instanceof Error ? [reply, null] : [null, reply]))
}

/**
 * The ioredis transaction shape over a node-redis MULTI, created at exec() (a Cluster routes it by its
 * first key; `asking`, sent to that Cluster node with ASKING first, after an ASK): the commands it was
 * given (fixedWindowCommands, through addFixedWindow), in order.
 */
export class Transaction implements RedisTransactionLike {
  private readonly commands: Array<[command: FixedWindowCommand | 'zrem', key: string, ...args: string[]]> = []
  constructor(
    private readonly client: AnyNodeRedis,
    /** What the batcher refreshes the slot map through after a redirect (redirects.ts): the adapter. */
    readonly redis: unknown,
    private readonly asking?: NodeRedisNodeLike,
  ) {}

  incrby(key: string, increment: string): RedisTransactionLike {
    this.commands.push(['incrby', key, increment])
    return this
  }

  pexpire(key: string, milliseconds: string): RedisTransactionLike {
    this.commands.push(['pexpire', key, milliseconds])
    return this
  }

  zrem(key: string, ...members: string[]): RedisTransactionLike {
    this.commands.push(['zrem', key, ...members])
    return this
  }

  exec(): Promise<Array<[Error | null, unknown]> | null> {
    const node = this.asking
    if (node === undefined) return this.execOn(this.client)
    return Promise.resolve()
      .then(() => (this.client as NodeRedisClusterLike).nodeClient(node as never))
      .then((client) => {
        // A client made for a node the cluster does not list must not keep the process alive.
        if (strangerNodes.has(node)) (client as { unref?(): void }).unref?.()
        // Queued back to back on the node's connection, with nothing between them: ASKING, then the
        // MULTI, whose queued commands and EXEC Redis serves under ASKING's flag (redirects.ts).
        // ASKING's own reply needs no look: without the flag, the transaction is refused and fails.
        client.sendCommand(['ASKING']).catch(() => {})
        return this.execOn(client)
      })
  }

  private execOn(client: AnyNodeRedis): Promise<Array<[Error | null, unknown]> | null> {
    const tx = client.multi()
    for (const [command, key, ...args] of this.commands) {
      if (command === 'zrem') tx.zRem(key, args)
      else tx[command === 'incrby' ? 'incrBy' : 'pExpire'](key, Number(args[0]))
    }
    return tx.exec().then(
      (replies) => pairs(this.raw(replies)),
      (error: unknown) => {
        const replies = (error as { replies?: unknown } | null)?.replies
        if (Array.isArray(replies)) return pairs(this.raw(replies))
        throw error
      },
    )
  }

  /**
   * Redis's own replies where node-redis turned them into something else: v4 answers PEXPIRE with a
   * boolean (v5 and v6 with Redis's integer). Only that, at PEXPIRE's places: any other reply is checked
   * as Redis sent it (batcher.ts), so a reply that fits no command still fails as a protocol error.
   */
  private raw(replies: unknown): unknown {
    if (!Array.isArray(replies)) return replies
    return replies.map((reply, i) => (this.commands[i]?.[0] === 'pexpire' && typeof reply === 'boolean' ? Number(reply) : reply))
  }
}

/**
 * A node the cluster does not list, as node-redis's `nodeClient` takes one: it makes the node's client
 * with the cluster's settings and keeps it in `client`.
 */
export interface StrangerNode {
  readonly host: string
  readonly port: number
  readonly address: string
  readonly readonly: false
  client?: { destroy?(): void; disconnect?(): unknown; unref?(): void }
}

/** The StrangerNodes made (askingTransaction), told apart from the cluster's own nodes. */
export const strangerNodes = new WeakSet<object>()
