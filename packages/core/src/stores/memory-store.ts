import { MemoryBound } from '../algorithms/memory-bound'
import type { MemoryTwin } from '../algorithms/protocol'
import { type Cell, Windows } from '../algorithms/windows'
import { describeValue, invalidOption, rejectUnknown, TollgateError } from '../errors'
import { algorithmOf } from '../registry'
import { unrefTimer } from '../timers'
import type { AlgorithmName, Logger, Store, StoreCall, StoreResult } from '../types'

export interface MemoryStoreOptions {
  /**
   * How often the counts of ended windows are dropped, in ms. One timer per store (unref'd, so it
   * never keeps the process alive), never one per key. 0 turns the sweep off: a client's count is
   * still set back to 0 at its first request in a new window, and the counts of clients that stopped
   * coming are then dropped only once a map holds `maxKeys` clients.
   * @default 5000
   */
  sweepIntervalMs?: number
  /** Clock used by the sweep, for tests. @default Date.now */
  clock?: () => number
  /**
   * Clients held at most per window length (and per algorithm's state), so a flood of new keys cannot
   * grow the process without bound (~150 bytes per client, see docs/guides/failures.md). Past it, new clients share
   * one count until entries expire; clients already held keep theirs. @default 1000000
   */
  maxKeys?: number
  /** Where reaching `maxKeys` is reported, once. @default console */
  logger?: Logger
}

const OPTION_KEYS = ['sweepIntervalMs', 'clock', 'maxKeys', 'logger']

/** Node's timers take at most 2^31 − 1 ms; a longer delay silently becomes 1 ms, a sweep every tick. */
const MAX_TIMER_MS = 2_147_483_647

/**
 * The default store: counts kept in this process, with the same semantics and the same decisions as
 * the Redis store for the same inputs. Each algorithm keeps its state in its memory twin (its file
 * under algorithms/); the window algorithms share one set of clock-aligned windows (windows.ts), so
 * memory stays bounded without a timer per key and key churn can never evict another client's count.
 */
export class MemoryStore implements Store {
  readonly local = true
  private readonly windows: Windows
  private readonly twins = new Map<AlgorithmName, MemoryTwin>()
  private readonly clock: () => number
  private timer: ReturnType<typeof setInterval> | undefined
  private readonly sweepMs: number
  /**
   * The sweep is due but not started: it starts with the first count, not at construction, because
   * workerd refuses timers in a Worker's global scope, where an app builds its limiters.
   */
  private idle: boolean

  constructor(options: MemoryStoreOptions = {}) {
    // Checked here, not when the sweep timer first fires: a bad clock would otherwise surface as a
    // TypeError from inside a timer, seconds later and far from the code that passed it.
    if (options === null || typeof options !== 'object' || Array.isArray(options)) {
      throw new TollgateError(
        `Invalid MemoryStore options: expected an object like { sweepIntervalMs }, got ${describeValue(options)}`,
        'TG_INVALID_OPTION',
      )
    }
    rejectUnknown('MemoryStore', options, OPTION_KEYS)
    const { clock, sweepIntervalMs } = options
    if (clock !== undefined && typeof clock !== 'function') {
      throw invalidOption('clock', 'a function returning the time in epoch ms', clock)
    }
    if (
      sweepIntervalMs !== undefined &&
      (typeof sweepIntervalMs !== 'number' ||
        !Number.isSafeInteger(sweepIntervalMs) ||
        sweepIntervalMs < 0 ||
        sweepIntervalMs > MAX_TIMER_MS)
    ) {
      throw invalidOption('sweepIntervalMs', `a whole number of ms from 0 (no sweep) to ${MAX_TIMER_MS}`, sweepIntervalMs)
    }
    const { maxKeys = 1_000_000, logger = console } = options
    if (typeof maxKeys !== 'number' || !Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw invalidOption('maxKeys', 'a whole number of clients ≥ 1', maxKeys)
    }
    if (logger === null || typeof logger !== 'object' || typeof logger.warn !== 'function') {
      throw invalidOption('logger', 'an object with warn() and error() methods, such as console', logger)
    }
    let warned = false
    this.windows = new Windows(
      new MemoryBound(maxKeys, () => {
        if (warned) return
        warned = true
        logger.warn(
          `Tollgate: the MemoryStore holds its maximum of ${maxKeys} clients (maxKeys); new clients share one count until entries expire, while the clients it holds keep theirs. Raise maxKeys, or use RedisStore.`,
        )
      }),
    )
    this.clock = clock ?? Date.now
    this.sweepMs = sweepIntervalMs ?? 5000
    this.idle = this.sweepMs > 0
  }

  /** The fixed window's fast path: the same counters as `admit` with algorithm "fixed-window". */
  increment(key: string, cost: number, windowMs: number, now: number): number {
    if (this.idle) this.startSweep()
    return this.windows.increment(key, cost, windowMs, now)
  }

  /** The mutable count behind `increment` (see Store.cell). */
  cell(key: string, windowMs: number, now: number): Cell {
    if (this.idle) this.startSweep()
    return this.windows.cell(key, windowMs, now)
  }

  /** Checks every limit, then counts all or none: the memory twin of each algorithm's Lua. */
  admit(call: StoreCall): StoreResult {
    if (this.idle) this.startSweep()
    const twin = this.twin(call.algorithm)
    const values: number[] = []
    let ok = true
    for (let i = 0; i < call.limits.length; i++) if (!twin.read(call, i, values)) ok = false
    if (ok) for (let i = 0; i < call.limits.length; i++) twin.write(call, i, values)
    return { allowed: ok, values }
  }

  /**
   * Takes over another store's answer to `call` (the limiter's fallback mirrors its store this way),
   * keeping whichever count is further along.
   */
  seed(call: StoreCall, result: StoreResult): void {
    if (this.idle) this.startSweep()
    const twin = this.twin(call.algorithm)
    const { values } = result
    for (let i = 0; i < call.limits.length; i++) twin.seed(call, i, values[2 * i]!, values[2 * i + 1]!, result.allowed)
  }

  /** Block ends by key (`blockDuration`), dropped by the sweep once over. */
  private readonly blocks = new Map<string, number>()

  blockedUntil(key: string, now: number): number {
    const until = this.blocks.get(key)
    return until !== undefined && until > now ? until : 0
  }

  block(key: string, until: number): void {
    if (this.idle) this.startSweep()
    if (until > (this.blocks.get(key) ?? 0)) this.blocks.set(key, until)
  }

  unblock(key: string): void {
    this.blocks.delete(key)
  }

  /** The fast path's count of `key` in the window containing `now` (the fixed window). */
  countOf(key: string, windowMs: number, now: number): number {
    return this.windows.read(key, windowMs, now)
  }

  /** `seed` for the fast path's count of `key` (the fixed window). */
  seedCount(key: string, windowMs: number, now: number, count: number): void {
    if (this.idle) this.startSweep()
    this.windows.seed(key, windowMs, now, count)
  }

  /** Undoes an admitted call (or increment), within its own window only, never below zero. */
  refund(call: StoreCall): void {
    const twin = this.twin(call.algorithm)
    for (let i = 0; i < call.limits.length; i++) twin.refund(call, i)
  }

  /** Moves an admitted call's count from its estimate to `actualCost`, in its own windows only (Store.settle). */
  settle(call: StoreCall, actualCost: number, now: number): void {
    if (actualCost === call.cost) return
    const twin = this.twin(call.algorithm)
    for (let i = 0; i < call.limits.length; i++) twin.settle(call, i, actualCost, now)
  }

  /** Forgets everything a call's client has in this store for the call's limits. */
  forget(call: StoreCall): void {
    const twin = this.twin(call.algorithm)
    for (let i = 0; i < call.limits.length; i++) twin.forget(call, i)
  }

  /** Drops every window that has ended by `now`, full GCRA buckets and empty logs. Runs on a timer; callable in tests. */
  prune(now: number): void {
    this.windows.prune(now)
    for (const [key, until] of this.blocks) if (until <= now) this.blocks.delete(key)
    for (const twin of this.twins.values()) twin.prune(now)
  }

  /** Number of client entries held (window counts, GCRA buckets, logs). */
  get size(): number {
    let n = this.windows.size
    for (const twin of this.twins.values()) n += twin.size
    return n
  }

  /** Stops the sweep timer. Only needed to end a process cleanly in tests; the timer is unref'd. */
  shutdown(): void {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
    this.idle = false
  }

  private startSweep(): void {
    this.idle = false
    this.timer = setInterval(() => this.prune(this.clock()), this.sweepMs)
    unrefTimer(this.timer)
  }

  private twin(name: AlgorithmName): MemoryTwin {
    let twin = this.twins.get(name)
    if (twin === undefined) {
      twin = algorithmOf(name).memory(this.windows)
      this.twins.set(name, twin)
    }
    return twin
  }
}
