import { FIXED_WINDOW_REPLIES, fixedWindowCount, fixedWindowTtl, type RedisTransactionLike } from '../../algorithms/fixed-window'
import { TollgateError } from '../../errors'
import { windowIndex } from '../../keys'
import { type ColdStart, type Expiry, expire, type FailureCauses, storeError, timeoutError } from './deadline'
import { askingTransaction, askTarget, MIN_LEFT_MS, prepareRetry, redirectOf } from './redirects'
import { ClientTransactions, describeReply, RedisProtocolError, type TransactionSender } from './transaction'

/**
 * Keys in one transaction at most. A full batch goes out at once instead of waiting for the end of
 * the event-loop turn: Redis starts on it while this process builds the next (so the two overlap
 * rather than take turns), and no single MULTI grows large enough to stall Redis for its other clients.
 */
export const MAX_BATCH_KEYS = 64

/** A request merged into a queued INCRBY after its first one: its place in the count, and its promise. */
interface Merged {
  /** The costs queued after the first request and up to this one, its own included. */
  readonly offset: number
  readonly resolve: (count: number) => void
  readonly reject: (error: unknown) => void
}

/**
 * Increments of one window key waiting for the next flush, merged. The first request's promise is
 * the entry's own, so the common case (one request per key per turn) allocates a single promise.
 * Every request of the entry is settled in the same synchronous step, in the order they came: a
 * merged request derived from the first one's promise (`first.then`) would settle a microtask late,
 * after the next transaction's requests when both replies arrive in one read, and a limiter that
 * mirrors the counts (resilience.ts) would then see the key's counts out of order.
 */
class PendingKey {
  total: number
  private resolveFirst!: (count: number) => void
  private rejectFirst!: (error: unknown) => void
  private merged: Merged[] | undefined
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
      this.resolveFirst = resolve
      this.rejectFirst = reject
    })
  }

  /** The Redis key: the stem and the window index (fixed-window.ts). */
  get key(): string {
    return `${this.stem}:${this.index}`
  }

  /** Adds a request of `cost` to the queued INCRBY: its count is the first request's plus the costs queued after the first, its own included. */
  merge(cost: number): Promise<number> {
    const offset = this.total - this.firstCost + cost
    this.total += cost
    return new Promise<number>((resolve, reject) => {
      this.merged ??= []
      this.merged.push({ offset, resolve, reject })
    })
  }

  /** The merged INCRBY returned `count`, the total after every merged request: the first request's count is the part up to its own cost. */
  settle(count: number): void {
    const first = count - this.total + this.firstCost
    this.resolveFirst(first)
    if (this.merged !== undefined) for (const m of this.merged) m.resolve(first + m.offset)
  }

  reject(error: unknown): void {
    this.rejectFirst(error)
    if (this.merged !== undefined) for (const m of this.merged) m.reject(error)
  }
}

/** One transaction on its way: its requests, whether they were answered, and its deadline. */
interface InFlight {
  readonly entries: PendingKey[]
  settled: boolean
  timer: Expiry | undefined
  /** Where it was sent (last), told when it misses its deadline. */
  sender: TransactionSender | undefined
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
    /** Where the next transaction goes (store.ts `transactions`). */
    private readonly sender: () => TransactionSender,
    private readonly timeoutMs: number,
    /** Send each request at once, in its own MULTI/EXEC. */
    private readonly unbatched: boolean,
    /** A Cluster transaction must stay within one slot: each key is its own transaction (still merged per key). */
    private readonly perKey: boolean,
    /** What the store knows of its client, to name a failure's cause (client-watch.ts). */
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
        // Merged into a queued INCRBY: settled with the first request, at its own place in the count.
        return entry.merge(cost)
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
    const state: InFlight = { entries, settled: false, timer: undefined, sender: undefined, deadlineAt: 0, retried: false }
    if (!this.transact(state)) return
    const ms = this.timeoutMs
    if (this.perKey) state.deadlineAt = Date.now() + ms
    state.timer = expire(
      ms,
      (waited) => {
        if (state.settled) return
        state.settled = true
        state.sender?.missed()
        fail(entries, timeoutError(waited, this.causes))
      },
      this.coldStart,
    )
  }

  /**
   * Sends `state`'s MULTI/EXEC (again, for a retry: `asking`, the transaction ASKING first on the node
   * an ASK named); false if the client threw before sending.
   */
  private transact(state: InFlight, asking?: RedisTransactionLike): boolean {
    const { entries } = state
    let tx: TransactionSender
    let reply: Promise<unknown[] | null>
    try {
      tx = asking === undefined ? this.sender() : new ClientTransactions({ multi: () => asking })
      state.sender = tx
      reply = tx.send(entries)
    } catch (error) {
      if (state.retried) this.finish(state, storeError(error, this.causes))
      else fail(entries, storeError(error, this.causes))
      return false
    }
    reply.then(
      (results) => {
        if (state.settled) return // too late: the requests were already answered by the failure policy
        if (results === null)
          return this.finish(state, new TollgateError('Redis aborted the transaction (EXEC returned null)', 'TG_STORE_ERROR'))
        const mismatch = this.settle(entries, results)
        if (mismatch !== undefined) {
          tx.reset(mismatch)
          return this.finish(state, storeError(mismatch))
        }
        state.settled = true
        state.timer?.clear()
        this.coldStart?.answered()
      },
      (error) => {
        if (state.settled) return
        if (error instanceof RedisProtocolError) tx.reset(error)
        // Cluster: a transaction refused by a redirect did not run (EXECABORT): send it once more,
        // within the same deadline (redirects.ts). After an ASK (its slot mid-migration, its key
        // already on the target), with ASKING on the node the ASK names: a fresh slot map would still
        // send it to the source, which answers ASK again for as long as the migration lasts.
        const redirect = this.perKey && !state.retried ? redirectOf(error) : undefined
        if (redirect === undefined) return this.finish(state, storeError(error, this.causes))
        state.retried = true
        const target = askTarget(error)
        // Checked before the target's transaction is made: for a node the client has not connected to,
        // making it adds a connection to the client's pool.
        if (target !== undefined && state.deadlineAt - Date.now() < MIN_LEFT_MS) return this.finish(state, storeError(error, this.causes))
        const onTarget = target === undefined ? undefined : askingTransaction((tx as { redis?: unknown }).redis, target)
        if (onTarget !== undefined) {
          this.transact(state, onTarget)
          return
        }
        void prepareRetry(redirect, (tx as { redis?: unknown }).redis, state.deadlineAt).then((go) => {
          if (state.settled) return
          if (go) this.transact(state)
          else this.finish(state, storeError(error, this.causes))
        })
      },
    )
    return true
  }

  /**
   * Each request's count from EXEC's `results` (fixedWindowCount), or, when they do not fit the
   * transaction sent, the protocol error and no request answered: a count out of another reply is
   * never handed out.
   */
  private settle(entries: PendingKey[], results: unknown[]): RedisProtocolError | undefined {
    if (!Array.isArray(results) || results.length !== entries.length * FIXED_WINDOW_REPLIES)
      return new RedisProtocolError(
        `EXEC was answered ${describeReply(results)} for ${entries.length} keys of ${FIXED_WINDOW_REPLIES} commands`,
      )
    const counts = new Array<number | Error>(entries.length)
    for (let i = 0; i < entries.length; i++) {
      const count = fixedWindowCount(results, i * FIXED_WINDOW_REPLIES, entries[i]!.total)
      if (count === undefined) {
        const at = i * FIXED_WINDOW_REPLIES
        return new RedisProtocolError(
          `EXEC answered INCRBY of ${entries[i]!.total} with ${describeReply(results[at])} and PEXPIRE with ${describeReply(results[at + 1])}`,
        )
      }
      counts[i] = count
    }
    for (let i = 0; i < entries.length; i++) {
      const count = counts[i]!
      if (typeof count === 'number') entries[i]!.settle(count)
      else entries[i]!.reject(storeError(count))
    }
    return undefined
  }

  private finish(state: InFlight, error: unknown): void {
    if (state.settled) return
    state.settled = true
    state.timer?.clear()
    fail(state.entries, error)
  }
}
