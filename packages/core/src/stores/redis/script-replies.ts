import { TollgateError } from '../../errors'
import type { StoreCall, StoreResult } from '../../types'

/*
 * A script's reply, matched to the call it answers (algorithms/protocol.ts): an admit replies
 * [call id, allowed (1/0), two numbers per limit], a refund its call id. A client pairs replies with
 * commands by their order alone, so one reply missing or one too many (a broken proxy, a bug in a
 * client) hands every later command the reply of another. A reply that does not fit its call is
 * therefore never read as a count: the call fails, and the connection, whose replies are out of step,
 * is reset (resetConnection), since every call after it on that connection would be answered wrongly too.
 */

/** The parts of a client used to reset a connection: ioredis (`disconnect`, a Cluster's `nodes`) or the node-redis adapter. */
export interface ResettableClient {
  readonly status?: string
  readonly isCluster?: boolean
  /** ioredis: `disconnect(true)` closes the connection and reconnects. */
  disconnect?(reconnect?: boolean): void
  /** ioredis Cluster: its masters, each an ioredis client of its own. */
  nodes?(role: 'master'): ClusterNodeLike[]
  /** The node-redis adapter's own reset (node-redis.ts). */
  resetConnection?(key: string): void
}

/** An ioredis Cluster node: an ioredis client to one master. */
export interface ClusterNodeLike {
  readonly status?: string
  readonly options?: { readonly host?: string; readonly port?: number; readonly username?: unknown }
  disconnect?(reconnect?: boolean): void
}

/** A call's failure when its reply is not its own: TG_STORE_ERROR, naming what came back. */
export function protocolError(op: 'admit' | 'refund' | 'settle', call: StoreCall, reply: unknown, why: string): TollgateError {
  return new TollgateError(
    `Redis store call failed: protocol error: the reply to the ${op} of call ${JSON.stringify(call.id)} ${why} (got ${sketch(reply)}); ` +
      'the connection is reset, since its replies are out of step with its commands',
    'TG_STORE_ERROR',
  )
}

/** The admit's answer from its script's reply, or, when the reply is not this call's, why not. */
export function admitResult(call: StoreCall, reply: unknown): StoreResult | string {
  if (!Array.isArray(reply)) return 'is not an array'
  const n = call.limits.length
  if (reply.length !== 2 + 2 * n) return `has ${reply.length} elements, not ${2 + 2 * n} (the call id, allowed, two numbers per limit)`
  if (reply[0] !== call.id) return 'carries another call id'
  const allowed = reply[1]
  if (allowed !== 0 && allowed !== 1) return 'has no 1 or 0 for allowed'
  const values: number[] = new Array(2 * n)
  for (let i = 0; i < 2 * n; i++) {
    const v = reply[i + 2]
    // A first run replies with numbers; a call run again replies with the first run's, kept as text.
    const x = typeof v === 'number' ? v : typeof v === 'string' && v !== '' ? Number(v) : Number.NaN
    if (!Number.isFinite(x)) return `has a value that is not a number at ${i + 2}`
    values[i] = x
  }
  return { allowed: allowed === 1, values }
}

/**
 * Closes the connection a reply came out of step on, so that its client reconnects and pairs replies
 * with commands afresh: a standalone ioredis client's own (`disconnect(true)`), a Cluster's connection to
 * the master serving `key` (`nodeKey`, "host:port"), node-redis's through its adapter. Only a connection
 * that is up: every call the desync reached fails here, and the first reset is enough; one that is
 * already reconnecting is left to it. The commands still unanswered on it are sent again by ioredis once
 * reconnected; the scripts, recorded per call, do not count twice for that.
 */
export function resetConnection(client: ResettableClient, key: string, nodeKey: string): void {
  try {
    if (typeof client.resetConnection === 'function') client.resetConnection(key)
    else if (client.isCluster === true) {
      const node = client.nodes?.('master').find((n) => `${n.options?.host}:${n.options?.port}` === nodeKey)
      if (node?.status === 'ready') node.disconnect?.(true)
    } else if (client.status === 'ready') client.disconnect?.(true)
  } catch {
    // A client that cannot be reset keeps failing the calls whose replies do not fit: never a wrong count.
  }
}

/** A reply, shortly, for an error message. */
function sketch(reply: unknown): string {
  let text: string
  try {
    text = JSON.stringify(reply) ?? String(reply)
  } catch {
    text = String(reply)
  }
  return text.length > 80 ? `${text.slice(0, 80)}…` : text
}
