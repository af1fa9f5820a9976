import type { RedisTransactionLike } from '../../algorithms/fixed-window'
import { hex, sha1 as sha1Of } from '../../hashes'
import type { WatchedClient } from './client-watch'
import { type StrangerNode, strangerNodes, Transaction } from './node-redis-transaction'
import { type AnyNodeRedis, isNodeRedisCluster, type NodeRedisClientLike, type NodeRedisClusterLike } from './node-redis-types'
import { onePer } from './one-per'
import { keySlot } from './slots'

/*
 * node-redis (the `redis` package, v4 and v5: `createClient`, `createCluster`) presented to RedisStore
 * through the ioredis-shaped RedisClientLike it already speaks, so the store, its batcher,
 * its deadline and its checks run one code path for both clients. Detected once, at construction
 * (isNodeRedis); @tollgate/core never imports `redis`: these types are structural.
 *
 * What differs from ioredis, and how it is bridged here:
 * - commands go through `sendCommand(args)` (a Cluster's takes the key that routes it first), with
 *   every argument a string;
 * - no defineCommand: a script runs as EVALSHA of its SHA1, and as EVAL after a NOSCRIPT (which also
 *   caches it in Redis), as ioredis's defined commands do; client-watch.ts preloads them all;
 * - MULTI replies are plain values, and a failed command makes exec() throw a MultiErrorReply that
 *   carries every reply: both turned into ioredis's [error, value] pairs, whose shape the batcher checks
 *   as on every transport (node-redis matches each reply to its command itself, so a mismatch fails the
 *   calls and leaves its connection alone);
 * - a Cluster's MULTI goes to the master of its first key's slot and does not follow MOVED itself:
 *   the batcher's one retry (redirects.ts) asks for a fresh slot map through refreshSlotsCache;
 * - connection state is `isOpen`/`isReady`, not ioredis's `status`; a Cluster names its nodes'
 *   connection errors 'node-error' and says 'connect' once it has its slot map;
 * - no public way to drop one connection and reconnect (`disconnect()`/`destroy()` end the client for
 *   good): a connection whose replies are out of step is reset by asking the server to close it (QUIT),
 *   after which node-redis reconnects by itself, failing (never resending) what was in flight.
 */

/** A node-redis Cluster's internal slot map (v5's `_slots`; v4 keeps it private): `rediscover` is what it runs on MOVED. */
interface SlotsInternals {
  rediscover?: (startWith: unknown) => Promise<void>
}

/** SHA1 of a script, as EVALSHA names it. */
function sha1(lua: string): string {
  return hex(sha1Of(lua))
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}

/**
 * A failed script call's error carrying the command, as ioredis's errors do (`command`): client-watch.ts
 * reads a refused script's keys from it.
 */
function withCommand(error: unknown, name: string, args: string[]): unknown {
  if (error instanceof Error && (error as { command?: unknown }).command === undefined) {
    Object.defineProperty(error, 'command', { value: { name, args }, configurable: true })
  }
  return error
}

/**
 * A node-redis client or Cluster as a RedisClientLike (store.ts, which checks the fit) and the
 * WatchedClient of client-watch.ts. One
 * per node-redis object (see nodeRedisAdapter), so stores sharing a client share one watch.
 */
export class NodeRedisAdapter implements WatchedClient {
  readonly isCluster: boolean
  /** Per node ('' on a standalone Redis), the connection resetConnection last closed: −1 − its socket epoch, or the time. */
  private readonly resets = new Map<string, number>()

  constructor(private readonly client: AnyNodeRedis) {
    this.isCluster = isNodeRedisCluster(client)
  }

  /** ioredis's names for node-redis's state: 'ready' once commands go out, 'connecting' while they queue. */
  get status(): string {
    const client = this.client
    if (!client.isOpen) return 'wait'
    if (this.isCluster) return (client as NodeRedisClusterLike).masters.length > 0 ? 'ready' : 'connecting'
    return (client as NodeRedisClientLike).isReady ? 'ready' : 'connecting'
  }

  /** Sends `args` on the node serving `key` (any node when undefined): the key routes it on a Cluster. */
  send(key: string | undefined, args: string[]): Promise<unknown> {
    try {
      if (this.isCluster) return (this.client as NodeRedisClusterLike).sendCommand(key, false, args)
      return (this.client as NodeRedisClientLike).sendCommand(args)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  multi(): RedisTransactionLike {
    return new Transaction(this.client, this)
  }

  /**
   * A transaction for the Cluster master at `address` ("host:port", as an ASK names it), ASKING first
   * (redirects.ts). A node the cluster has no client for (one just added, importing its first slot: its
   * slot map lists only nodes that own slots) gets one made by the cluster's own `nodeClient`, with the
   * cluster's settings; it is kept for that address while it is used and closed once idle (ASK_IDLE_MS),
   * and never keeps the process alive: the cluster's own client takes over once the node owns the slot.
   */
  askingTransaction(address: string): RedisTransactionLike | undefined {
    if (!this.isCluster) return undefined
    const master = (this.client as NodeRedisClusterLike).masters.find((m) => `${m.host}:${m.port}` === address)
    if (master !== undefined) return new Transaction(this.client, this, master)
    const colon = address.lastIndexOf(':')
    const port = Number(address.slice(colon + 1))
    if (colon <= 0 || !Number.isInteger(port)) return undefined
    return new Transaction(this.client, this, this.stranger(address.slice(0, colon), port))
  }

  /** Nodes the cluster does not list, by address: the node object its nodeClient fills in, and when it was last used. */
  private readonly strangers = new Map<string, { node: StrangerNode; timer: ReturnType<typeof setTimeout> | undefined }>()

  private stranger(host: string, port: number): StrangerNode {
    const address = `${host}:${port}`
    let known = this.strangers.get(address)
    if (known === undefined) {
      known = { node: { host, port, address, readonly: false }, timer: undefined }
      strangerNodes.add(known.node)
      this.strangers.set(address, known)
    }
    const entry = known
    if (entry.timer !== undefined) clearTimeout(entry.timer)
    entry.timer = setTimeout(() => {
      this.strangers.delete(address)
      const client = entry.node.client
      entry.node.client = undefined
      try {
        ;(client?.destroy ?? client?.disconnect)?.call(client)
      } catch {}
    }, ASK_IDLE_MS)
    entry.timer.unref?.()
    return entry.node
  }

  del(...keys: string[]): Promise<number> {
    return this.send(keys[0], ['DEL', ...keys]) as Promise<number>
  }

  get(key: string): Promise<string | null> {
    return this.send(key, ['GET', key]) as Promise<string | null>
  }

  set(key: string, value: string, px: 'PX', milliseconds: string): Promise<unknown> {
    return this.send(key, ['SET', key, value, px, milliseconds])
  }

  /** ioredis's defineCommand: `this[name](numberOfKeys, ...keys, ...args)` runs `lua` by EVALSHA, by EVAL after a NOSCRIPT. */
  defineCommand(name: string, definition: { lua: string }): void {
    const { lua } = definition
    const sha = sha1(lua)
    const run = (numberOfKeys: string | number, ...rest: Array<string | number>): Promise<unknown> => {
      const tail = [String(numberOfKeys), ...rest.map(String)]
      const key = Number(numberOfKeys) > 0 ? tail[1] : undefined
      return this.send(key, ['EVALSHA', sha, ...tail]).then(undefined, (error: unknown) => {
        if (!isNoScript(error)) throw withCommand(error, 'evalsha', [sha, ...tail])
        return this.send(key, ['EVAL', lua, ...tail]).then(undefined, (e: unknown) => {
          throw withCommand(e, 'eval', [lua, ...tail])
        })
      })
    }
    ;(this as unknown as Record<string, unknown>)[name] = run
  }

  /**
   * Resets the connection serving `key`, whose replies are out of step with its commands
   * (script-replies.ts): QUIT makes the server close it, and node-redis reconnects. QUIT is answered
   * before any ACL check on Redis 7.0, and allowed to every user on later Redis and Valkey (it needs no
   * permission the store's user lacks). Once per connection, since a QUIT sent while the client
   * reconnects would close the fresh one: a standalone client's connection is told by its socket epoch
   * (node-redis v5; not while it is not ready), any other by time, one QUIT per RESET_PAUSE_MS.
   */
  resetConnection(key: string): void {
    const node = this.nodeOf(key)
    const client = this.client as NodeRedisClientLike & { readonly socketEpoch?: unknown }
    const epoch = this.isCluster ? undefined : client.socketEpoch
    if (!this.isCluster && !client.isReady) return
    const last = this.resets.get(node)
    if (typeof epoch === 'number') {
      if (last === -epoch - 1) return
      this.resets.set(node, -epoch - 1)
    } else {
      const now = Date.now()
      if (last !== undefined && last >= 0 && now - last < RESET_PAUSE_MS) return
      this.resets.set(node, now)
    }
    this.send(key, ['QUIT']).catch(() => {})
  }

  /** The master serving `key`'s slot ("host:port"), or its slot while the map is unknown; '' on a standalone Redis. */
  nodeOf(key: string): string {
    if (!this.isCluster) return ''
    const slot = keySlot(key)
    const master = (this.client as NodeRedisClusterLike).slots[slot]?.master
    return master === undefined ? `slot ${slot}` : `${master.host}:${master.port}`
  }

  // WatchedClient (client-watch.ts): the preload, the eviction check, refusals, connection errors.

  /** The ACL user the client logs in as, in ioredis's shape (node-redis's `options.username`, also set from a URL). */
  get options(): { username?: unknown } {
    const options = (this.client as { options?: { username?: unknown; defaults?: { username?: unknown } } }).options
    return { username: options?.username ?? options?.defaults?.username }
  }

  on(event: string, listener: (...args: never[]) => void): unknown {
    // A Cluster's per-node errors are 'node-error' (ioredis: 'node error'); it is ready once it has
    // its slot map, which it announces as 'connect'.
    const name = this.isCluster ? ({ 'node error': 'node-error', ready: 'connect' }[event] ?? event) : event
    return this.client.on(name, listener as (...args: unknown[]) => void)
  }

  call(command: string, ...args: Array<string | number>): Promise<unknown> {
    return this.send(undefined, [command, ...args.map(String)])
  }

  nodes(_role: 'master'): WatchedClient[] {
    if (!this.isCluster) return [this]
    const cluster = this.client as NodeRedisClusterLike
    return cluster.masters.map((master) => ({
      call: (command: string, ...args: Array<string | number>) =>
        Promise.resolve()
          .then(() => cluster.nodeClient(master as never))
          .then((node) => node.sendCommand([command, ...args.map(String)])),
    }))
  }

  /**
   * Refreshes a Cluster's slot map the way node-redis does on MOVED (its `_slots.rediscover`), for the
   * one retry of a redirected call (redirects.ts). Where that is not reachable (v4), calls back
   * at once: the retry then goes out on the map the client has.
   */
  refreshSlotsCache(callback?: (error?: Error | null) => void): void {
    const done = (error?: unknown) => callback?.(error instanceof Error ? error : null)
    const cluster = this.client as NodeRedisClusterLike & { _slots?: SlotsInternals }
    const slots = cluster._slots
    const master = cluster.masters[0]
    if (!this.isCluster || typeof slots?.rediscover !== 'function' || master === undefined) {
      done()
      return
    }
    Promise.resolve()
      .then(() => cluster.nodeClient(master as never))
      .then((node) => slots.rediscover!(node))
      .then(() => done(), done)
  }
}

/** How long a client for a node the cluster does not list is kept after its last ASK. */
const ASK_IDLE_MS = 10_000

/** How long after a reset of a connection another is not sent: one desync fails many calls, one QUIT resets it. */
const RESET_PAUSE_MS = 1000

/** The one adapter of a node-redis client or Cluster. */
export const nodeRedisAdapter = /* @__PURE__ */ onePer((client: AnyNodeRedis) => new NodeRedisAdapter(client))
