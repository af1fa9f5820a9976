import { ALGORITHMS } from '../../algorithms'
import { TollgateError } from '../../errors'
import type { StoreCall, StoreResult } from '../../types'

/*
 * A script's reply, matched to the calls it answers (algorithms/protocol.ts): a batch of admits replies
 * [first call id, then a code and two numbers per limit per call], a refund its call id. A client pairs replies with
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
    `Redis store call failed: protocol error: the reply to the ${op} ${op === 'admit' ? 'batch starting with' : 'of'} call ${JSON.stringify(call.id)} ${why} (got ${sketch(reply)}); ` +
      'the connection is reset, since its replies are out of step with its commands',
    'TG_STORE_ERROR',
  )
}

/**
 * The answers of a batch of admits from its script's reply (algorithms/protocol.ts): per call a
 * StoreResult, or the TollgateError of a key of that call alone (code -1); or, when the reply is not
 * this batch's, why not. A call admitted by an earlier run of the batch (code 2) is admitted; one run by
 * an earlier run that recorded itself on its key (code 3) is admitted when no other call of the batch has
 * that key (`shared`), and otherwise fails: its first reply was lost, and which calls on the key it
 * admitted cannot be told; so does one the earlier run decided after it (code 4).
 */
export function batchResults(
  calls: readonly StoreCall[],
  reply: unknown,
  shared: (i: number) => boolean,
): Array<StoreResult | TollgateError> | string {
  if (!Array.isArray(reply)) return 'is not an array'
  let expected = 1
  for (const call of calls) expected += 1 + 2 * call.limits.length
  if (reply.length !== expected)
    return `has ${reply.length} elements, not ${expected} (the first call id, then a code and two numbers per limit for each of ${calls.length} calls)`
  if (reply[0] !== calls[0]!.id) return 'carries another call id'
  const results: Array<StoreResult | TollgateError> = []
  let at = 1
  for (let c = 0; c < calls.length; c++) {
    const call = calls[c]!
    const code = reply[at]
    const n = 2 * call.limits.length
    if (code === -1) {
      results.push(new TollgateError(`Redis store call failed: ${String(reply[at + 1])}`, 'TG_STORE_ERROR'))
      at += 1 + n
      continue
    }
    if (code !== 0 && code !== 1 && code !== 2 && code !== 3 && code !== 4) return `has no code 1, 0, 2, 3, 4 or -1 at ${at}`
    if (code === 4 || (code === 3 && shared(c))) {
      results.push(
        new TollgateError(
          'Redis store call failed: the call ran before its connection was lost and was sent again; its first reply is lost',
          'TG_STORE_ERROR',
        ),
      )
      at += 1 + call.limits.length * 2
      continue
    }
    const values: number[] = new Array(n)
    for (let i = 0; i < n; i++) {
      const v = reply[at + 1 + i]
      // GCRA's TATs come as text (Redis truncates a Lua number to an integer); the rest as integers.
      const x = typeof v === 'number' ? v : typeof v === 'string' && v !== '' ? Number(v) : Number.NaN
      if (!Number.isFinite(x)) return `has a value that is not a number at ${at + 1 + i}`
      values[i] = x
    }
    ALGORITHMS[call.algorithm].fromScript?.(call, values)
    results.push({ allowed: code !== 0, values })
    at += 1 + n
  }
  return results
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
