import { ALGORITHM_NAMES, ALGORITHMS, argsOf, keysOf } from '../algorithms'
import type { RedisTransactionLike } from '../algorithms/fixed-window'
import { type Duration, parseDuration } from '../duration'
import { describeValue, invalidOption, rejectUnknown, TollgateError } from '../errors'
import type { AlgorithmName, Store, StoreCall, StoreResult } from '../types'
import { FixedWindowBatcher } from './redis-batch'
import { withDeadline } from './redis-deadline'

/**
 * The part of an ioredis client (`Redis` or `Cluster`) this store uses. Declared structurally so
 * that @tollgate/core never imports ioredis: memory-only users install no Redis client.
 */
export interface RedisClientLike {
  multi(): RedisTransactionLike
  del(...keys: string[]): Promise<number>
  /** ioredis defineCommand: the scripts run by EVALSHA, falling back to EVAL after a NOSCRIPT. */
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  readonly status?: string
  readonly isCluster?: boolean
}

export interface RedisStoreOptions {
  /**
   * A connected ioredis `Redis` or `Cluster`. The store borrows it: it never connects or quits it,
   * and works whatever its offline-queue and retry settings, because every call has its own deadline.
   */
  client: RedisClientLike
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
}

const OPTION_KEYS = ['client', 'timeout', 'batch']
const CLIENT_METHODS = ['multi', 'del', 'defineCommand'] as const

type Script = (...args: Array<string | number>) => Promise<unknown>

/** ioredis command names of an algorithm's two scripts, e.g. tollgateGcraAdmit. */
function scriptName(algorithm: AlgorithmName, op: 'Admit' | 'Refund'): string {
  return `tollgate${algorithm.replace(/(^|-)(\w)/g, (_, __, c: string) => c.toUpperCase())}${op}`
}

/**
 * Counts in Redis (standalone or Cluster) through a caller-owned ioredis client: each algorithm's
 * Lua (its file under algorithms/) run by EVALSHA, and the fixed window's batched MULTI/EXEC fast
 * path (redis-batch.ts). Every call has a deadline (redis-deadline.ts).
 */
export class RedisStore implements Store {
  readonly local = false
  readonly timeoutMs: number
  private readonly client: RedisClientLike
  private readonly batcher: FixedWindowBatcher
  private readonly admitScripts = new Map<AlgorithmName, Script>()
  private readonly refundScripts = new Map<AlgorithmName, Script>()

  constructor(options: RedisStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new TollgateError(
        `Invalid RedisStore options: expected an object like { client }, got ${describeValue(options)}`,
        'TG_INVALID_OPTION',
      )
    }
    rejectUnknown('RedisStore', options, OPTION_KEYS)
    const client = checkClient(options.client)
    if (options.batch !== undefined && typeof options.batch !== 'boolean') throw invalidOption('batch', 'true or false', options.batch)
    this.client = client
    this.timeoutMs = options.timeout === undefined ? 50 : parseDuration('timeout', options.timeout)
    this.batcher = new FixedWindowBatcher(() => client.multi(), this.timeoutMs, options.batch === false, client.isCluster === true)
    for (const name of ALGORITHM_NAMES) {
      const { admitScript, refundScript } = ALGORITHMS[name]
      this.admitScripts.set(name, this.define(scriptName(name, 'Admit'), admitScript))
      this.refundScripts.set(name, this.define(scriptName(name, 'Refund'), refundScript))
    }
  }

  /** The fixed window's fast path: one INCRBY + PEXPIRE in a MULTI, batched and merged per key. */
  increment(key: string, cost: number, windowMs: number, now: number): Promise<number> {
    return this.batcher.increment(key, cost, windowMs, now)
  }

  async admit(call: StoreCall): Promise<StoreResult> {
    const keys = keysOf(ALGORITHMS[call.algorithm], call)
    const reply = (await withDeadline(
      this.admitScripts.get(call.algorithm)!(keys.length, ...keys, ...argsOf(call)),
      this.timeoutMs,
    )) as unknown[]
    return { allowed: reply[0] === 1, values: reply.slice(1).map(Number) }
  }

  async refund(call: StoreCall): Promise<void> {
    const keys = keysOf(ALGORITHMS[call.algorithm], call)
    await withDeadline(this.refundScripts.get(call.algorithm)!(keys.length, ...keys, ...argsOf(call)), this.timeoutMs)
  }

  async forget(call: StoreCall): Promise<void> {
    await withDeadline(this.client.del(...keysOf(ALGORITHMS[call.algorithm], call)), this.timeoutMs)
  }

  private define(name: string, lua: string): Script {
    this.client.defineCommand(name, { lua })
    const fn = (this.client as unknown as Record<string, Script | undefined>)[name]
    if (typeof fn === 'function') return fn.bind(this.client)
    return () => Promise.reject(new TollgateError(`the client's defineCommand() did not define ${name}`, 'TG_STORE_ERROR'))
  }
}

/** The client, if it has what this store calls; otherwise an error naming what it lacks. */
function checkClient(client: unknown): RedisClientLike {
  const expected = 'an ioredis Redis or Cluster instance'
  if (client === null || typeof client !== 'object') throw invalidOption('client', expected, client)
  const missing = CLIENT_METHODS.filter((m) => typeof (client as Record<string, unknown>)[m] !== 'function')
  if (missing.length === 0) return client as RedisClientLike
  // node-redis (createClient) has sendCommand and isOpen; it has no defineCommand.
  const nodeRedis = typeof (client as Record<string, unknown>).sendCommand === 'function' && 'isOpen' in client
  const lacks = `it has no ${missing.map((m) => `${m}()`).join(', ')}${nodeRedis ? '; this looks like a node-redis client, which RedisStore does not support yet' : ''}`
  throw invalidOption('client', `${expected} (${lacks})`, client)
}
