import { ALGORITHM_NAMES, ALGORITHMS, argsOf, callRecordKey, forgetKeysOf, refundKeysOf, settleKeysOf } from '../../algorithms'
import { correctionBatchScript, refundBatchScript } from '../../algorithms/correction-batch'
import {
  leaseArgs,
  leaseFixedScript,
  leaseGcraScript,
  leaseGrantOf,
  leaseKeys,
  leaseReturnScript,
  returnArgs,
} from '../../algorithms/leases'
import { scriptsOf } from '../../algorithms/scripts'
import { type Duration, parseDuration } from '../../duration'
import { describeValue, invalidOption, rejectUnknown, TollgateError } from '../../errors'
import type { AlgorithmName, LeaseGrant, LeaseRequest, Store, StoreCall, StoreResult } from '../../types'
import { FixedWindowBatcher } from './batcher'
import { watchClient } from './client-watch'
import { type Correction, CorrectionBatcher } from './correction-batcher'
import { type ColdStart, type FailureCauses, withDeadline } from './deadline'
import type { NodeRedisClientLike, NodeRedisClusterLike } from './node-redis-types'
import { followRedirects } from './redirects'
import { removalTransaction, removeByCallId } from './removals'
import { ScriptBatcher } from './script-batcher'
import { batchResults, protocolError, resetConnection } from './script-replies'
import { checkClient, type RedisClientLike, TRANSPORTS, type Transport, transactions } from './store-client'

export type { RedisClientLike } from './store-client'

export interface RedisStoreOptions {
  /**
   * A connected ioredis `Redis` or `Cluster`, or a node-redis (`redis` v4, v5 or v6) client or cluster from
   * `createClient()` / `createCluster()` after `await client.connect()`. The store borrows it: it
   * never connects or quits it (it opens no connection of its own, unless `transport` asks for one), and
   * works whatever its offline-queue and retry settings, because every call has its own deadline.
   */
  client: RedisClientLike | NodeRedisClientLike | NodeRedisClusterLike
  /**
   * Deadline for one store call, from the request's point of view. A reply later than this is
   * ignored, and the limiter applies its `onStoreError` policy instead of holding the request.
   * @default "50ms"
   */
  timeout?: Duration
  /**
   * Send the transactions of one event-loop turn together in one round trip, merging increments of
   * the same key (each request still gets its exact position in the count). Off, each decision is
   * its own MULTI/EXEC round trip.
   * @default true
   */
  batch?: boolean
  /**
   * How the fixed window's transactions reach Redis. `"client"`: through the client's own
   * `multi()`, as any ioredis or node-redis user's code sends one. The other two are faster, opt-in,
   * and need a standalone ioredis client (refused at construction with any other):
   * - `"direct"`: the same commands as ioredis Commands written straight onto the client's connection
   *   in one write, without the Pipeline that `multi()` builds per transaction (direct-writer.ts). It
   *   relies on how ioredis numbers a transaction's commands; a `multi` replaced by a spy or a tracer
   *   of ioredis's batches sends that transaction through `multi()` again.
   * - `"own-connection"`: on one connection of the store's own, opened to the same server with the
   *   client's settings (host and port or path, TLS, username and password, db) while the client is
   *   ready, and closed with it; it reads the replies itself, the cheapest of the three for this
   *   process (docs/guides/redis.md, for the measurement). It costs one more connection per process,
   *   named `tollgate`, with its own protocol code, TCP keep-alive and a liveness rule: a transaction
   *   that misses its deadline on it, or a second with no reply while one is due, closes it, and it is
   *   reopened after a backoff that grows while it keeps going silent. Whenever it is not ready, the
   *   transactions go `"direct"`.
   * @default "client"
   */
  transport?: Transport
}

const OPTION_KEYS = ['client', 'timeout', 'batch', 'transport']
/** How long a fresh store's calls may wait for the client's first connection (see deadline()). */
const COLD_START_MS = 1000

type Script = (...args: Array<string | number>) => Promise<unknown>

/** ioredis command names of an algorithm's scripts, e.g. tollgateGcraAdmit. */
function scriptName(algorithm: AlgorithmName, op: 'Admit' | 'Refund' | 'Settle'): string {
  return `tollgate${algorithm.replace(/(^|-)(\w)/g, (_, __, c: string) => c.toUpperCase())}${op}`
}

/**
 * Counts in Redis (standalone or Cluster) through a caller-owned ioredis client: each algorithm's
 * Lua (its file under algorithms/) run by EVALSHA, and the fixed window's batched MULTI/EXEC fast
 * path (batcher.ts). Every call has a deadline (deadline.ts).
 */
export class RedisStore implements Store {
  readonly local = false
  /** True with a Cluster client: the keys of one call must share a hash slot (Store.cluster). */
  readonly cluster: boolean
  readonly timeoutMs: number
  private readonly client: RedisClientLike
  /** The node a store key lives on (see nodeOf), as the kind of client found at construction tells it. */
  private readonly nodeOfKey: (storeKey: string) => string
  private readonly batcher: FixedWindowBatcher
  /** The script algorithms' admits, batched per turn. */
  private readonly scripts: ScriptBatcher
  /** Refunds and settles, batched per turn. */
  private readonly corrections: CorrectionBatcher
  private readonly admitScripts = new Map<AlgorithmName, Script>()
  private readonly refundScripts = new Map<AlgorithmName, Script>()
  private readonly settleScripts = new Map<AlgorithmName, Script>()
  /** The `lease` option's scripts (algorithms/leases.ts). */
  private readonly leaseScripts: { fixed: Script; gcra: Script; back: Script }
  /** When the cold start ends (see coldWait): -1 before the first call, 0 once it has ended. */
  private coldUntil = -1
  /** Connection errors and refused commands seen on the client, named in failures (client-watch.ts). */
  private readonly causes: FailureCauses

  constructor(options: RedisStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new TollgateError(
        `Invalid RedisStore options: expected an object like { client }, got ${describeValue(options)}`,
        'TG_INVALID_OPTION',
      )
    }
    rejectUnknown('RedisStore', options, OPTION_KEYS)
    const [client, nodeOfKey] = checkClient(options.client)
    this.nodeOfKey = nodeOfKey
    if (options.batch !== undefined && typeof options.batch !== 'boolean') throw invalidOption('batch', 'true or false', options.batch)
    const transport = options.transport ?? 'client'
    if (!TRANSPORTS.includes(transport)) throw invalidOption('transport', `one of ${TRANSPORTS.map((t) => `"${t}"`).join(', ')}`, transport)
    this.client = client
    this.cluster = client.isCluster === true
    this.timeoutMs = options.timeout === undefined ? 50 : parseDuration('timeout', options.timeout)
    this.causes = watchClient(client)
    this.batcher = new FixedWindowBatcher(
      transactions(client, transport),
      this.timeoutMs,
      options.batch === false,
      client.isCluster === true,
      this.causes,
      this.coldStart,
    )
    for (const name of ALGORITHM_NAMES) {
      const scripts = scriptsOf(name)
      this.admitScripts.set(name, this.define(scriptName(name, 'Admit'), scripts.admit))
      this.refundScripts.set(name, this.define(scriptName(name, 'Refund'), refundBatchScript(scripts)))
      this.settleScripts.set(name, this.define(scriptName(name, 'Settle'), correctionBatchScript(scripts.settle)))
    }
    this.scripts = new ScriptBatcher(
      (algorithm, keys, args) => {
        const script = this.admitScripts.get(algorithm)!
        return this.within(() => script(keys.length, ...keys, ...args))
      },
      (calls, reply, shared) => {
        const results = batchResults(calls, reply, shared)
        if (typeof results === 'string') throw this.outOfStep('admit', calls[0]!, reply, results)
        return results
      },
      options.batch === false,
      this.cluster,
    )
    this.corrections = new CorrectionBatcher(
      (op, algorithm, keys, args) => {
        const tx = removalTransaction(this.client, op, algorithm, this.cluster)
        if (tx !== undefined) return this.within(() => removeByCallId(tx, keys, args))
        const script = (op === 'refund' ? this.refundScripts : this.settleScripts).get(algorithm)!
        return this.within(() => script(keys.length, ...keys, ...args))
      },
      (op, call, reply, why) => this.outOfStep(op, call, reply, why),
      options.batch === false,
      this.cluster,
    )
    this.leaseScripts = {
      fixed: this.define('tollgateLeaseFixed', leaseFixedScript()),
      gcra: this.define('tollgateLeaseGcra', leaseGcraScript()),
      back: this.define('tollgateLeaseReturn', leaseReturnScript()),
    }
  }

  /** A slice of the key's remaining quota, counted into the key, in one script (Store.lease). */
  lease(request: LeaseRequest): Promise<LeaseGrant> {
    const keys = leaseKeys(request)
    const script = request.algorithm === 'gcra' ? this.leaseScripts.gcra : this.leaseScripts.fixed
    return this.within(() =>
      script(keys.length, ...keys, ...leaseArgs(request)).then((reply) => {
        const grant = leaseGrantOf(reply)
        if (grant !== undefined) return grant
        resetConnection(this.client, request.stem, this.nodeOfKey(request.stem))
        throw new TollgateError(`Redis protocol error: a lease on ${request.stem} was answered with ${String(reply)}`, 'TG_STORE_ERROR')
      }),
    )
  }

  /** Gives back `unspent` units of a slice and ends the lease, under the process's marker only (Store.endLease). */
  async endLease(request: LeaseRequest, unspent: number): Promise<void> {
    const keys = leaseKeys(request)
    await this.within(() => this.leaseScripts.back(keys.length, ...keys, ...returnArgs(request, unspent)))
  }

  /** The fixed window's fast path: INCRBY and PEXPIRE in a MULTI (fixedWindowCommands), batched and merged per key. */
  increment(key: string, cost: number, windowMs: number, now: number): Promise<number> {
    return this.batcher.increment(key, cost, windowMs, now)
  }

  /** The call's algorithm's admit script, in a batch with the other admits of this turn (script-batcher.ts). */
  admit(call: StoreCall): Promise<StoreResult> {
    return this.scripts.admit(call)
  }

  /** Undoes an admitted call (Store.refund): the algorithm's refund, once per call id, in a batch with this turn's others. */
  refund(call: StoreCall): Promise<void> {
    const keys = refundKeysOf(ALGORITHMS[call.algorithm], call)
    // A refund by call id (the sorted sets') takes only its keys, its cost and its id.
    if (scriptsOf(call.algorithm).refundBatch !== undefined) return this.corrections.add('refund', call, keys, [call.cost, call.id])
    keys.push(callRecordKey(call, 'refund'))
    return this.corrections.add('refund', call, keys, argsOf(call))
  }

  /** Moves an admitted call's count to `actualCost` (Store.settle): the algorithm's settle, once per call id, batched. */
  async settle(call: StoreCall, actualCost: number, now: number): Promise<void> {
    if (actualCost === call.cost) return
    const keys = settleKeysOf(ALGORITHMS[call.algorithm], call)
    keys.push(callRecordKey(call, 'settle'))
    await this.corrections.add('settle', call, keys, [...argsOf(call), actualCost, now])
  }

  async forget(call: StoreCall): Promise<void> {
    const keys = forgetKeysOf(ALGORITHMS[call.algorithm], call)
    await this.within(() => this.client.del(...keys))
  }

  /** The end of the block on `key` (`blockDuration`), 0 when none: one GET. */
  async blockedUntil(key: string): Promise<number> {
    const value = await this.within(() => this.client.get(key))
    return value === null ? 0 : Number(value)
  }

  /** Blocks `key` until `until`: SET with the TTL in the same command, so no block outlives its end. */
  async block(key: string, until: number, now: number): Promise<void> {
    await this.within(() => this.client.set(key, String(until), 'PX', String(Math.max(1, until - now))))
  }

  /** Ends the block on `key` (`reset`): one DEL. */
  async unblock(key: string): Promise<void> {
    await this.within(() => this.client.del(key))
  }

  /** A reply that is not the call's own: the connection it came on is reset, and the call fails (script-replies.ts). */
  private outOfStep(op: 'admit' | Correction, call: StoreCall, reply: unknown, why: string): Error {
    resetConnection(this.client, call.storeKey, this.nodeOfKey(call.storeKey))
    return protocolError(op, call, reply, why)
  }

  /** `send()` under this store's deadline, following a Cluster redirect once (inCluster). */
  private within<T>(send: () => Promise<T>): Promise<T> {
    return withDeadline(this.client.isCluster === true ? this.inCluster(send) : send(), this.timeoutMs, this.causes, this.coldStart)
  }

  /**
   * A script (or DEL) on a Cluster, sent once more after a redirect the client did not follow itself
   * (redirects.ts), within this call's deadline. A standalone Redis never comes here.
   */
  private inCluster<T>(send: () => Promise<T>): Promise<T> {
    return followRedirects(send, this.client, Date.now() + this.timeoutMs)
  }

  /**
   * A fresh process's first calls wait for the connection (TCP, the ready check, the scripts) rather
   * than fall back, since a cold start is not an outage: a call that reaches its deadline before the
   * store's first reply may wait on, while the client reports no connection error, for at most
   * COLD_START_MS from the store's first call. Checked again every `timeout`, so a connection that
   * fails meanwhile ends the wait at the next check; the first reply ends the cold start.
   */
  private readonly coldStart: ColdStart = {
    wait: () => {
      if (this.coldUntil === 0) return 0
      const now = Date.now()
      if (this.coldUntil === -1) this.coldUntil = now + COLD_START_MS
      // A client that does not report its status is not an ioredis client connecting: no wait.
      if (this.client.status === undefined || this.causes.connectionError() !== undefined || now >= this.coldUntil) {
        this.coldUntil = 0
        return 0
      }
      return Math.min(this.timeoutMs, this.coldUntil - now)
    },
    answered: () => {
      this.coldUntil = 0
    },
  }

  /**
   * The node a store key lives on, so a failure opens that node's circuit only: on a Cluster, the
   * master serving the key's slot; a standalone Redis is one node.
   */
  nodeOf(storeKey: string): string {
    return this.nodeOfKey(storeKey)
  }

  private define(name: string, lua: string): Script {
    this.client.defineCommand(name, { lua })
    const fn = (this.client as unknown as Record<string, Script | undefined>)[name]
    if (typeof fn === 'function') return fn.bind(this.client)
    return () => Promise.reject(new TollgateError(`the client's defineCommand() did not define ${name}`, 'TG_STORE_ERROR'))
  }
}
