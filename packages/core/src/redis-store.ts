import { argsOf, type ConsumeCall, type ConsumeResult, keysOf } from './algorithms'
import { type Duration, parseDuration } from './duration'
import { describeValue, TollgateError } from './errors'
import { addFixedWindow, FIXED_WINDOW_REPLIES, type RedisTransactionLike, SCRIPTS, TTL_MARGIN_MS } from './redis-commands'
import { type Store, windowIndex } from './store'

/**
 * The part of an ioredis client (`Redis` or `Cluster`) this store uses. Declared structurally so
 * that @tollgate/core never imports ioredis: memory-only users install no Redis client.
 */
export interface RedisClientLike {
  multi(): RedisTransactionLike
  get(key: string): Promise<string | null>
  del(...keys: string[]): Promise<number>
  /** ioredis defineCommand: the scripts run by EVALSHA, falling back to EVAL after a NOSCRIPT. */
  defineCommand?(name: string, definition: { lua: string; numberOfKeys?: number }): void
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

const OPTION_KEYS = new Set(['client', 'timeout', 'batch'])

/**
 * Keys in one transaction at most. A full batch goes out at once instead of waiting for the end of
 * the event-loop turn: Redis starts on it while this process builds the next (so the two overlap
 * rather than take turns), and no single MULTI grows large enough to stall Redis for its other clients.
 */
export const MAX_BATCH_KEYS = 64

/**
 * Increments of one window key waiting for the next flush, merged. The first request's promise is
 * the entry's own; a request merged later derives its count from the first one's, so the common
 * case (one request per key per turn) allocates a single promise.
 */
class PendingKey {
  total: number
  resolve!: (count: number) => void
  reject!: (error: unknown) => void
  readonly first: Promise<number>
  constructor(
    readonly key: string,
    readonly ttlMs: number,
    readonly firstCost: number,
  ) {
    this.total = firstCost
    this.first = new Promise<number>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
  }

  /** The merged INCRBY returned `count`, the total after every merged request: the first request's count is the part up to its own cost. */
  settle(count: number): void {
    this.resolve(count - this.total + this.firstCost)
  }
}

/**
 * Fixed-window counts in Redis (standalone or Cluster) through a caller-owned ioredis client.
 * See redis-commands.ts for the exact transaction.
 */
export class RedisStore implements Store {
  readonly local = false
  readonly timeoutMs: number
  private readonly client: RedisClientLike
  private readonly batch: boolean
  private readonly cluster: boolean
  private pending = new Map<string, PendingKey>()
  private flushScheduled = false

  constructor(options: RedisStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new TollgateError(
        `Invalid RedisStore options: expected an object like { client }, got ${describeValue(options)}`,
        'TG_INVALID_OPTION',
      )
    }
    for (const name of Object.keys(options)) {
      if (!OPTION_KEYS.has(name)) {
        throw new TollgateError(`Unknown RedisStore option "${name}"; known options: ${[...OPTION_KEYS].join(', ')}`, 'TG_UNKNOWN_OPTION')
      }
    }
    const { client } = options
    if (client === null || typeof client !== 'object' || typeof (client as RedisClientLike).multi !== 'function') {
      throw new TollgateError(
        `Invalid option "client": expected an ioredis Redis or Cluster instance, got ${describeValue(client)}`,
        'TG_INVALID_OPTION',
      )
    }
    if (options.batch !== undefined && typeof options.batch !== 'boolean') {
      throw new TollgateError(`Invalid option "batch": expected true or false, got ${describeValue(options.batch)}`, 'TG_INVALID_OPTION')
    }
    this.client = client
    this.timeoutMs = options.timeout === undefined ? 50 : parseDuration('timeout', options.timeout)
    this.batch = options.batch ?? true
    // A Cluster transaction must stay within one slot; keys of different clients may be on
    // different nodes, so each key is its own transaction there (still merged per key).
    this.cluster = client.isCluster === true
    if (typeof client.defineCommand === 'function') {
      for (const [name, lua] of Object.entries(SCRIPTS)) client.defineCommand(name, { lua })
    }
  }

  /** One atomic check-and-update for the other algorithms and for several limits (see redis-commands.ts). */
  async consume(call: ConsumeCall): Promise<ConsumeResult> {
    const keys = keysOf(call)
    const name =
      call.algorithm === 'fixed-window'
        ? 'tollgateFixedWindow'
        : call.algorithm === 'sliding-window'
          ? 'tollgateSlidingWindow'
          : call.algorithm === 'gcra'
            ? 'tollgateGcra'
            : 'tollgateSlidingLog'
    const reply = (await this.withDeadline(this.script(name)(keys.length, ...keys, ...argsOf(call)))) as number[]
    return { allowed: reply[0] === 1, values: reply.slice(1).map(Number) }
  }

  /** Undoes an admitted call within its own window, never below zero. */
  async refund(call: ConsumeCall): Promise<void> {
    const keys = keysOf(call)
    await this.withDeadline(this.script('tollgateRefund')(keys.length, ...keys, call.algorithm, ...argsOf(call)))
  }

  /** Deletes every key of the call's client for the call's limits. */
  async forget(call: ConsumeCall): Promise<void> {
    await this.withDeadline(this.client.del(...keysOf(call)))
  }

  private script(name: keyof typeof SCRIPTS): (...args: Array<string | number>) => Promise<unknown> {
    const fn = (this.client as unknown as Record<string, unknown>)[name]
    if (typeof fn !== 'function') {
      throw new TollgateError(
        `This algorithm needs Lua scripts, but the client has no defineCommand(): pass an ioredis Redis or Cluster`,
        'TG_STORE_ERROR',
      )
    }
    return (fn as (...args: Array<string | number>) => Promise<unknown>).bind(this.client)
  }

  increment(key: string, cost: number, windowMs: number, now: number): Promise<number> {
    const index = windowIndex(now, windowMs)
    const windowKey = `${key}:${index}`
    const entry = this.pending.get(windowKey)
    if (entry !== undefined) {
      // Merged into a queued INCRBY. This request's count is the first request's count, plus the
      // costs queued after the first one and ahead of this one, plus its own.
      const offset = entry.total - entry.firstCost + cost
      entry.total += cost
      return entry.first.then((firstCount) => firstCount + offset)
    }
    const fresh = new PendingKey(windowKey, (index + 1) * windowMs - now + TTL_MARGIN_MS, cost)
    this.pending.set(windowKey, fresh)
    if (!this.batch || this.pending.size >= MAX_BATCH_KEYS) this.flush()
    else if (!this.flushScheduled) {
      this.flushScheduled = true
      // setImmediate, not a microtask: it runs after every request parsed in this I/O turn.
      setImmediate(this.scheduledFlush)
    }
    return fresh.first
  }

  async get(key: string, windowMs: number, now: number): Promise<number> {
    const value = await this.withDeadline(this.client.get(`${key}:${windowIndex(now, windowMs)}`))
    return value === null ? 0 : Number(value)
  }

  async reset(key: string, windowMs: number, now: number): Promise<void> {
    await this.withDeadline(this.client.del(`${key}:${windowIndex(now, windowMs)}`))
  }

  private readonly scheduledFlush = (): void => {
    this.flushScheduled = false
    this.flush()
  }

  private flush(): void {
    const batch = this.pending
    if (batch.size === 0) return
    this.pending = new Map()
    if (this.cluster || batch.size === 1) {
      for (const entry of batch.values()) this.send([entry])
    } else {
      this.send([...batch.values()])
    }
  }

  private send(entries: PendingKey[]): void {
    const fail = (error: unknown) => {
      for (const entry of entries) entry.reject(error)
    }
    let reply: Promise<Array<[Error | null, unknown]> | null>
    try {
      const tx = this.client.multi()
      for (const entry of entries) addFixedWindow(tx, entry.key, entry.total, entry.ttlMs)
      reply = tx.exec()
    } catch (error) {
      fail(storeError(error))
      return
    }
    let settled = false
    const timer = expire(this.timeoutMs, () => {
      if (settled) return
      settled = true
      fail(new TollgateError(`Redis did not answer within ${this.timeoutMs} ms`, 'TG_STORE_TIMEOUT'))
    })
    reply.then(
      (results) => {
        if (settled) return // too late: the requests were already answered by the failure policy
        settled = true
        clearTimeout(timer)
        if (results === null) return fail(new TollgateError('Redis aborted the transaction (EXEC returned null)', 'TG_STORE_ERROR'))
        for (let i = 0; i < entries.length; i++) {
          const [error, value] = results[i * FIXED_WINDOW_REPLIES] ?? [new Error('missing reply'), null]
          const count = Number(value)
          if (error !== null || !Number.isFinite(count)) entries[i]!.reject(storeError(error ?? value))
          else entries[i]!.settle(count)
        }
      },
      (error) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        fail(storeError(error))
      },
    )
  }

  private withDeadline<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = expire(this.timeoutMs, () =>
        reject(new TollgateError(`Redis did not answer within ${this.timeoutMs} ms`, 'TG_STORE_TIMEOUT')),
      )
      promise.then(
        (value) => {
          clearTimeout(timer)
          resolve(value)
        },
        (error) => {
          clearTimeout(timer)
          reject(storeError(error))
        },
      )
    })
  }
}

/**
 * A deadline that does not misfire when this process, not Redis, was slow: if the event loop stalled
 * past the deadline, the timer runs before the reply already waiting in the socket is read. So when it
 * fires, let one poll phase read pending I/O (setImmediate runs after it) before giving up.
 */
function expire(ms: number, onTimeout: () => void): NodeJS.Timeout {
  return setTimeout(() => setImmediate(onTimeout), ms)
}

function storeError(cause: unknown): TollgateError {
  if (cause instanceof TollgateError) return cause
  const message = cause instanceof Error ? cause.message : describeValue(cause)
  return new TollgateError(`Redis store call failed: ${message}`, 'TG_STORE_ERROR', { cause })
}
