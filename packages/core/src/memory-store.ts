import { type Store, windowIndex } from './store'

export interface MemoryStoreOptions {
  /**
   * How often stale windows are dropped when no request arrives to do it, in ms. One timer per
   * store (unref'd, so it never keeps the process alive), never one per key.
   * @default 5000
   */
  sweepIntervalMs?: number
  /** Clock used by the sweep, for tests. @default Date.now */
  clock?: () => number
}

interface WindowCounts {
  index: number
  counts: Map<string, number>
}

/**
 * The default store: fixed windows aligned to the clock, kept in this process.
 *
 * Counts are grouped by window length, and each group holds only the current window: when time
 * reaches the next window the whole map is replaced, so expired counts are freed in one step
 * without a timer or expiry field per key. There is no LRU: a flood of new keys costs memory for
 * one window but can never evict, and so never reset, another client's count.
 */
export class MemoryStore implements Store {
  readonly local = true
  private readonly groups = new Map<number, WindowCounts>()
  private readonly clock: () => number
  private timer: NodeJS.Timeout | undefined

  constructor(options: MemoryStoreOptions = {}) {
    this.clock = options.clock ?? Date.now
    const every = options.sweepIntervalMs ?? 5000
    if (every > 0) {
      this.timer = setInterval(() => this.prune(this.clock()), every)
      this.timer.unref()
    }
  }

  increment(key: string, cost: number, windowMs: number, now: number): number {
    const counts = this.current(windowMs, now)
    const count = (counts.get(key) ?? 0) + cost
    counts.set(key, count)
    return count
  }

  get(key: string, windowMs: number, now: number): number {
    const group = this.groups.get(windowMs)
    if (group === undefined || group.index !== windowIndex(now, windowMs)) return 0
    return group.counts.get(key) ?? 0
  }

  reset(key: string, windowMs: number, now: number): void {
    const group = this.groups.get(windowMs)
    if (group !== undefined && group.index === windowIndex(now, windowMs)) group.counts.delete(key)
  }

  /** Drops every window that has ended by `now`. Runs on a timer; callable directly in tests. */
  prune(now: number): void {
    for (const [windowMs, group] of this.groups) {
      if (windowIndex(now, windowMs) > group.index) this.groups.delete(windowMs)
    }
  }

  /** Number of client counts held, across all window lengths. */
  get size(): number {
    let n = 0
    for (const group of this.groups.values()) n += group.counts.size
    return n
  }

  /** Stops the sweep timer. Only needed to end a process cleanly in tests; the timer is unref'd. */
  shutdown(): void {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
  }

  private current(windowMs: number, now: number): Map<string, number> {
    const index = windowIndex(now, windowMs)
    let group = this.groups.get(windowMs)
    if (group === undefined) {
      group = { index, counts: new Map() }
      this.groups.set(windowMs, group)
    } else if (index > group.index) {
      // The window ended: drop all its counts at once.
      group.index = index
      group.counts = new Map()
    }
    // index < group.index happens only if the clock steps back; counting into the newest window
    // keeps the count conservative instead of reopening an old one.
    return group.counts
  }
}
