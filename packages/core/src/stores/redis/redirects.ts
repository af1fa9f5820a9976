import type { RedisTransactionLike } from '../../algorithms/fixed-window'

/*
 * Redis Cluster redirects that reach the store. ioredis's Cluster client follows MOVED and ASK itself
 * for plain commands, EVALSHA and (by resending the pipeline with ASKING before MULTI) transactions,
 * but a MULTI/EXEC whose slot moved to a node the client has not connected to yet comes back as
 * EXECABORT, the redirect only in `err.previousErrors`; and whatever it gives up on (too many
 * redirections, TRYAGAIN while a slot is half migrated) surfaces too. node-redis follows neither for
 * a MULTI. Each of these means the command did not run, so the store tries once more, within the
 * deadline of the original call: never a second try after it, because a decision has by then been
 * taken without the store and a late write would count a request twice. After MOVED it refreshes the
 * slot map first; after ASK it sends ASKING and the transaction to the node the ASK names
 * (askingTransaction), since a fresh map still points at the source while the slot is mid-migration.
 * ioredis resends an ASKed pipeline only through the connections it has, so a transaction for a slot
 * migrating to a node it has not connected to yet (one just added to the cluster) meets ASK until it
 * gives up: askingTransaction then connects to that node the way ioredis does for an ASKed command.
 */

/** `moved`: the slot map is stale (MOVED, ASK, CLUSTERDOWN); `tryagain`: a slot is mid-migration. */
export type Redirect = 'moved' | 'tryagain'

const REDIRECT = /^(?:Too many Cluster redirections\. Last error: (?:\w+: )?)?(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b/

/**
 * The redirect that made `error` happen, or undefined when it is anything else (a timeout, NOPERM,
 * OOM, a closed connection: a command that may have run is never retried).
 */
export function redirectOf(error: unknown): Redirect | undefined {
  if (!(error instanceof Error)) return undefined
  const match = REDIRECT.exec(error.message)
  if (match !== null) return match[1] === 'TRYAGAIN' ? 'tryagain' : 'moved'
  // ioredis's MULTI/EXEC: "EXECABORT Transaction discarded because of previous errors.", the queued
  // commands' own errors in previousErrors. Only a transaction refused by redirects alone is retried.
  const previous = (error as { previousErrors?: unknown }).previousErrors
  if (!error.message.startsWith('EXECABORT') || !Array.isArray(previous) || previous.length === 0) return undefined
  let kind: Redirect | undefined
  for (const cause of previous) {
    const k = redirectOf(cause)
    if (k === undefined) return undefined
    if (kind === undefined || k === 'tryagain') kind = k
  }
  return kind
}

const ASK = /^(?:Too many Cluster redirections\. Last error: (?:\w+: )?)?ASK \d+ (\S+)/

/**
 * The node ("host:port") an ASK names, when `error` is an ASK, or a transaction refused (EXECABORT)
 * by ASKs alone, all to that one node; undefined otherwise.
 */
export function askTarget(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined
  const match = ASK.exec(error.message)
  if (match !== null) return match[1]
  const previous = (error as { previousErrors?: unknown }).previousErrors
  if (!error.message.startsWith('EXECABORT') || !Array.isArray(previous) || previous.length === 0) return undefined
  let target: string | undefined
  for (const cause of previous) {
    const t = askTarget(cause)
    if (t === undefined || (target !== undefined && t !== target)) return undefined
    target = t
  }
  return target
}

/** One node of an ioredis `Cluster` (`cluster.nodes()`), a plain ioredis client: the part used here. */
interface IoredisNode {
  readonly options: { readonly host?: string; readonly port?: number }
  pipeline(): IoredisPipeline
}

interface IoredisPipeline {
  asking(): IoredisPipeline
  multi(): IoredisPipeline
  incrby(key: string, increment: string): IoredisPipeline
  pexpire(key: string, milliseconds: string): IoredisPipeline
  exec(): Promise<Array<[Error | null, unknown]> | null>
}

/**
 * A transaction on one ioredis Cluster node, preceded by ASKING in the same write: ASKING, MULTI, the
 * commands, EXEC, one pipeline on the node's own connection, so nothing else goes between ASKING and
 * MULTI. Redis keeps the ASKING flag while the client is in MULTI (it clears the flag after a command
 * only outside MULTI), so every queued command and EXEC is served by the importing node.
 */
class IoredisAskingTransaction implements RedisTransactionLike {
  private readonly pipeline: IoredisPipeline
  private commands = 0
  constructor(node: IoredisNode) {
    this.pipeline = node.pipeline().asking().multi()
  }

  incrby(key: string, increment: string): RedisTransactionLike {
    this.pipeline.incrby(key, increment)
    this.commands++
    return this
  }

  pexpire(key: string, milliseconds: string): RedisTransactionLike {
    this.pipeline.pexpire(key, milliseconds)
    this.commands++
    return this
  }

  exec(): Promise<Array<[Error | null, unknown]> | null> {
    // The first exec() closes the MULTI (EXEC), the second sends the pipeline.
    this.pipeline.exec()
    const commands = this.commands
    return this.pipeline.exec().then((results) => {
      // ASKING, MULTI, one QUEUED per command, then EXEC's reply: the transaction's replies, as multi().exec() gives them.
      const [error, replies] = results?.[commands + 2] ?? [new Error('missing EXEC reply'), null]
      if (error !== null) {
        // Refused as a whole (EXECABORT): its queued commands' own errors with it, as ioredis's multi() gives them.
        const previous = (results ?? []).slice(2, commands + 2).flatMap(([e]) => (e === null ? [] : [e]))
        throw Object.assign(error, { previousErrors: previous })
      }
      if (replies === null) return null
      if (!Array.isArray(replies) || replies.length !== commands) throw new Error('EXEC replied with an unexpected shape')
      return replies.map((reply): [Error | null, unknown] => (reply instanceof Error ? [reply, null] : [null, reply]))
    })
  }
}

/** What knows how to send a transaction to one node with ASKING first (NodeRedisAdapter). */
interface AskingOwner {
  askingTransaction(address: string): RedisTransactionLike | undefined
}

/**
 * The parts of an ioredis `Cluster` that reach a node it has no connection to yet: what its own ASK
 * handler for a command calls (`connectionPool.findOrCreate(natMapper(address))`), the same in
 * ioredis 5 and 6, private in its types, so each is checked before use.
 */
interface IoredisClusterPool {
  natMapper(address: string): { host?: string; port?: number }
  readonly connectionPool: { findOrCreate(node: { host?: string; port?: number }): IoredisNode }
}

/**
 * The Cluster's connection to the master at `address`, made by its own pool when it has none: created
 * with the Cluster's redisOptions (auth, TLS) and its NAT map, connected on first use, closed with the
 * Cluster, and dropped by the Cluster's next slot-map refresh while the node serves no slot, as the
 * connection ioredis makes when it follows an ASK for a plain command. Undefined on an ioredis without
 * that pool.
 */
function poolNode(cluster: object, address: string): IoredisNode | undefined {
  const { natMapper, connectionPool } = cluster as Partial<IoredisClusterPool>
  if (typeof natMapper !== 'function' || typeof connectionPool?.findOrCreate !== 'function') return undefined
  const node = connectionPool.findOrCreate(natMapper.call(cluster, address))
  return typeof node?.pipeline === 'function' ? node : undefined
}

/**
 * A transaction for the node at `address` ("host:port", as an ASK names it) with ASKING sent first
 * on the same connection, through `owner`, the client the failed transaction went through: an
 * ioredis Cluster (its nodes(), matched by their options' host and port, else a connection from its
 * own pool: poolNode) or the node-redis adapter. Undefined when the client has no connection to that
 * node and cannot make one.
 */
export function askingTransaction(owner: unknown, address: string): RedisTransactionLike | undefined {
  if (owner === null || typeof owner !== 'object') return undefined
  try {
    if (typeof (owner as Partial<AskingOwner>).askingTransaction === 'function') return (owner as AskingOwner).askingTransaction(address)
    const nodes = (owner as { nodes?: unknown }).nodes
    if (typeof nodes !== 'function') return undefined
    const node =
      (nodes.call(owner, 'master') as IoredisNode[]).find((n) => `${n.options.host}:${n.options.port}` === address) ??
      poolNode(owner, address)
    return node === undefined ? undefined : new IoredisAskingTransaction(node)
  } catch {
    // A client that cannot name its nodes: the retry goes out on a fresh slot map instead.
    return undefined
  }
}

/** The part of an ioredis `Cluster` used here (`refreshSlotsCache` is public in its JS, marked @ignore in its types). */
interface SlotMapOwner {
  refreshSlotsCache?: (callback?: (error?: Error | null) => void) => void
}

/** Pause before trying a TRYAGAIN again: a migration moves a slot's keys in a few ms at most. */
export const TRYAGAIN_PAUSE_MS = 5
/** A retry needs at least this much of the deadline left to be worth sending. */
export const MIN_LEFT_MS = 2

/** True once `owner`'s slot map is refreshed (joining a refresh already under way), false if that took longer than `ms`. */
function refreshSlotMap(owner: SlotMapOwner, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    try {
      owner.refreshSlotsCache!(() => {
        clearTimeout(timer)
        resolve(true)
      })
    } catch {
      clearTimeout(timer)
      resolve(false)
    }
  })
}

/**
 * Gets ready for the one retry of a call that failed with `redirect`: refreshes the slot map (or,
 * for TRYAGAIN, pauses). Resolves true when the retry may go out: the map was refreshed (a retry on
 * the stale map would meet the same redirect) and there is still time before `deadlineAt`, the time
 * the caller stops waiting.
 */
export async function prepareRetry(redirect: Redirect, owner: unknown, deadlineAt: number): Promise<boolean> {
  const left = deadlineAt - Date.now()
  if (left < MIN_LEFT_MS) return false
  if (redirect === 'tryagain') {
    if (left < TRYAGAIN_PAUSE_MS + MIN_LEFT_MS) return false
    await new Promise((resolve) => setTimeout(resolve, TRYAGAIN_PAUSE_MS))
  } else if (typeof (owner as SlotMapOwner | undefined)?.refreshSlotsCache === 'function') {
    if (!(await refreshSlotMap(owner as SlotMapOwner, left - MIN_LEFT_MS))) return false
  }
  return deadlineAt - Date.now() >= MIN_LEFT_MS
}

/**
 * `send()`, sent once more if it failed on a Cluster redirect and there is time before `deadlineAt`
 * (see prepareRetry). The caller's own deadline still bounds the whole.
 */
export async function followRedirects<T>(send: () => Promise<T>, owner: unknown, deadlineAt: number): Promise<T> {
  try {
    return await send()
  } catch (error) {
    const redirect = redirectOf(error)
    if (redirect === undefined || !(await prepareRetry(redirect, owner, deadlineAt))) throw error
    return send()
  }
}
