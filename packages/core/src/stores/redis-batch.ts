import {
  addFixedWindow,
  FIXED_WINDOW_COUNT_REPLY,
  FIXED_WINDOW_REPLIES,
  fixedWindowTtl,
  type RedisTransactionLike,
} from '../algorithms/fixed-window'
import { TollgateError } from '../errors'
import { windowIndex } from '../keys'
import { type ColdStart, type Expiry, expire, type FailureCauses, storeError, timeoutError } from './redis-deadline'
import { prepareRetry, redirectOf } from './redis-redirects'

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
    /** The caller's key, without the window: the batch's map holds entries by it (see increment). */
    readonly stem: string,
    readonly index: number,
    readonly windowMs: number,
    readonly ttlMs: number,
    readonly firstCost: number,
  ) {
    this.total = firstCost
    this.first = new Promise<number>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
  }

  /** The Redis key: the stem and the window index (fixed-window.ts). */
  get key(): string {
    return `${this.stem}:${this.index}`
  }

  /** The merged INCRBY returned `count`, the total after every merged request: the first request's count is the part up to its own cost. */
  settle(count: number): void {
    this.resolve(count - this.total + this.firstCost)
  }
}

/** One transaction on its way: its requests, whether they were answered, and its deadline. */
interface InFlight {
  readonly entries: PendingKey[]
  settled: boolean
  timer: Expiry | undefined
  /** Cluster only (0 otherwise): when the requests stop waiting, so a retry never goes out after it. */
  deadlineAt: number
  retried: boolean
}

function fail(entries: PendingKey[], error: unknown): void {
  for (const entry of entries) entry.reject(error)
}

/**
 * The fixed window's fast path in Redis: the transactions of one event-loop turn sent together in
 * one round trip, increments of the same key merged into one INCRBY, each request still given its
 * exact position in the count.
 */
export class FixedWindowBatcher {
  private pending = new Map<string, PendingKey>()
  private flushScheduled = false

  constructor(
    private readonly multi: () => RedisTransactionLike,
    private readonly timeoutMs: number,
    /** Send each request at once, in its own MULTI/EXEC. */
    private readonly unbatched: boolean,
    /** A Cluster transaction must stay within one slot: each key is its own transaction (still merged per key). */
    private readonly perKey: boolean,
    /** What the store knows of its client, to name a failure's cause (redis-checks.ts). */
    private readonly causes?: FailureCauses,
    /** A fresh client's first connection, which calls may wait for (RedisStore.coldStart). */
    private readonly coldStart?: ColdStart,
  ) {}

  increment(key: string, cost: number, windowMs: number, now: number): Promise<number> {
    // By the caller's key, not the window key: a caller keeps one string per client (counting.ts), whose
    // hash is computed once, where a window key built per request would be hashed (and flattened) anew.
    const index = windowIndex(now, windowMs)
    const entry = this.pending.get(key)
    if (entry !== undefined) {
      if (entry.index === index && entry.windowMs === windowMs) {
        // Merged into a queued INCRBY. This request's count is the first request's count, plus the
        // costs queued after the first one and ahead of this one, plus its own.
        const offset = entry.total - entry.firstCost + cost
        entry.total += cost
        return entry.first.then((firstCount) => firstCount + offset)
      }
      // The window turned within one turn (or the key counts windows of another length): what is
      // queued goes now, in its own window's key, and this request starts the next batch.
      this.flush()
    }
    const fresh = new PendingKey(key, index, windowMs, fixedWindowTtl(windowMs, now), cost)
    this.pending.set(key, fresh)
    if (this.unbatched || this.pending.size >= MAX_BATCH_KEYS) this.flush()
    else if (!this.flushScheduled) {
      this.flushScheduled = true
      // setImmediate, not a microtask: it runs after every request parsed in this I/O turn.
      setImmediate(this.scheduledFlush)
    }
    return fresh.first
  }

  private readonly scheduledFlush = (): void => {
    this.flushScheduled = false
    this.flush()
  }

  private flush(): void {
    const batch = this.pending
    if (batch.size === 0) return
    this.pending = new Map()
    if (this.perKey || batch.size === 1) {
      for (const entry of batch.values()) this.send([entry])
    } else {
      this.send([...batch.values()])
    }
  }

  private send(entries: PendingKey[]): void {
    const state: InFlight = { entries, settled: false, timer: undefined, deadlineAt: 0, retried: false }
    if (!this.transact(state)) return
    const ms = this.timeoutMs
    if (this.perKey) state.deadlineAt = Date.now() + ms
    state.timer = expire(
      ms,
      (waited) => {
        if (state.settled) return
        state.settled = true
        fail(entries, timeoutError(waited, this.causes))
      },
      this.coldStart,
    )
  }

  /** Sends `state`'s MULTI/EXEC (again, for a retry); false if the client threw before sending. */
  private transact(state: InFlight): boolean {
    const { entries } = state
    let tx: RedisTransactionLike
    let reply: Promise<Array<[Error | null, unknown]> | null>
    try {
      tx = this.multi()
      // A transaction of Tollgate's own takes the key's parts, so no window key is built (or flattened) per key.
      if (tx.window !== undefined) for (const entry of entries) tx.window(entry.stem, entry.index, entry.total, entry.ttlMs)
      else for (const entry of entries) addFixedWindow(tx, entry.key, entry.total, entry.ttlMs)
      reply = tx.exec()
    } catch (error) {
      if (state.retried) this.finish(state, storeError(error))
      else fail(entries, storeError(error))
      return false
    }
    reply.then(
      (results) => {
        if (state.settled) return // too late: the requests were already answered by the failure policy
        if (results === null)
          return this.finish(state, new TollgateError('Redis aborted the transaction (EXEC returned null)', 'TG_STORE_ERROR'))
        state.settled = true
        state.timer?.clear()
        this.coldStart?.answered()
        for (let i = 0; i < entries.length; i++) {
          const [error, value] = results[i * FIXED_WINDOW_REPLIES + FIXED_WINDOW_COUNT_REPLY] ?? [new Error('missing reply'), null]
          const count = Number(value)
          if (error !== null || !Number.isFinite(count)) entries[i]!.reject(storeError(error ?? value, this.causes))
          else entries[i]!.settle(count)
        }
      },
      (error) => {
        if (state.settled) return
        // Cluster: a transaction refused by a redirect did not run (EXECABORT): refresh the slot map
        // and send it once more, within the same deadline (redis-redirects.ts).
        const redirect = this.perKey && !state.retried ? redirectOf(error) : undefined
        if (redirect === undefined) return this.finish(state, storeError(error, this.causes))
        state.retried = true
        void prepareRetry(redirect, (tx as { redis?: unknown }).redis, state.deadlineAt).then((go) => {
          if (state.settled) return
          if (go) this.transact(state)
          else this.finish(state, storeError(error, this.causes))
        })
      },
    )
    return true
  }

  private finish(state: InFlight, error: unknown): void {
    if (state.settled) return
    state.settled = true
    state.timer?.clear()
    fail(state.entries, error)
  }
}
