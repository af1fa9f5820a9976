import { stem, windowIndex } from '../keys'
import type { LimitSpec } from '../types'
import type { MemoryBound } from './memory-bound'
import type { MemoryTwin } from './protocol'

/**
 * One client's count `n` in window `w`. The maps hold these rather than numbers, so counting a client
 * already held is one lookup and one add (no second hashing to write the sum back), and a holder of
 * the cell (the limiter's own lookup of its clients, see limiter/fast-path/local-cells.ts) counts without the map at all.
 * A cell is only ever changed in place: every holder reads the same count. A cell whose `w` is not the
 * window being counted holds a count of an ended window, which reads as 0.
 */
export interface Cell {
  n: number
  w: number
}

/**
 * Counts per window length, for the two window algorithms and the batched fixed window of the memory
 * store, without a timer or an expiry per key. A fixed window's map keeps each client's cell from one
 * window to the next and sets it back to 0 at the client's first count in the new one, so a client
 * that returns window after window costs one lookup, never a new entry in a growing map (with
 * 10,000 clients, that insert was the memory store's largest cost). Cells of clients that did not
 * return are dropped by the sweep (prune), by the first count of a full map in each window (`held`),
 * and all at once when a window length goes unused for a whole window. Once a sliding window uses the
 * length, the map is replaced at each window instead, the ended one kept as `previous`. There is no
 * LRU: a flood of new keys costs memory but can never evict, and so never reset, another client's count.
 */
export class Windows {
  private readonly groups = new Map<number, Group>()
  /** The group `current` returned last, and its window length: nearly every call asks for the same one. */
  private last: Group | undefined
  private lastMs = -1

  constructor(readonly bound: MemoryBound) {}

  /** The counts of the window of length `windowMs` containing `now`. */
  current(windowMs: number, now: number, sliding = false): Group {
    const index = windowIndex(now, windowMs)
    let group = windowMs === this.lastMs ? this.last : this.groups.get(windowMs)
    if (group === undefined) {
      group = { index, counts: new Map(), previous: EMPTY, sliding, full: -1 }
      this.groups.set(windowMs, group)
    } else if (index > group.index) {
      // The window ended. A sliding window's counts move to `previous` (for one window); a fixed
      // window's cells stay, read as 0 until their client counts again (Cell.w).
      if (group.sliding) {
        group.previous = index === group.index + 1 ? group.counts : EMPTY
        group.counts = new Map()
      }
      group.index = index
    }
    // index < group.index happens only if the clock steps back; counting into the newest window
    // keeps the count conservative instead of reopening an old one.
    if (sliding) group.sliding = true
    this.last = group
    this.lastMs = windowMs
    return group
  }

  /**
   * The key `key` is counted under in `group`'s current window: itself, or the shared overflow entry
   * once the map holds `maxKeys` clients (memory-bound.ts). A full map first drops the cells of ended
   * windows, once per window, so clients that left make room as they would have at a window's end.
   */
  held(group: Group, key: string): string {
    const counts = group.counts
    if (counts.size >= this.bound.maxKeys && group.full !== group.index && !counts.has(key)) {
      group.full = group.index
      dropEnded(group)
    }
    return this.bound.keyIn(counts, key)
  }

  /**
   * `key`'s cell in the window containing `now`, created at 0 when new; the shared overflow cell once
   * the map is full (memory-bound.ts). It holds the count of that window only: a holder must stop
   * using it when the window ends.
   */
  cell(key: string, windowMs: number, now: number): Cell {
    const group = this.current(windowMs, now)
    const counts = group.counts
    let cell = counts.get(key)
    if (cell === undefined) {
      const held = this.held(group, key)
      cell = held === key ? undefined : counts.get(held)
      if (cell === undefined) {
        cell = { n: 0, w: group.index }
        counts.set(held, cell)
        return cell
      }
    }
    if (cell.w !== group.index) {
      cell.n = 0
      cell.w = group.index
    }
    return cell
  }

  /** Adds `cost` to `key` in the current window; the count after it. */
  increment(key: string, cost: number, windowMs: number, now: number): number {
    const cell = this.cell(key, windowMs, now)
    cell.n += cost
    return cell.n
  }

  /** `key`'s count in the window containing `now`. */
  read(key: string, windowMs: number, now: number): number {
    const group = this.current(windowMs, now)
    return countIn(group.counts, this.held(group, key), group.index)
  }

  /**
   * Takes `cost` back from `key` in the window containing `now` (the call's own), never below zero. A
   * refund that arrives after the edge still undoes its call where a sliding window still reads it, in
   * the previous window, as Redis does when it decrements the call's own key; a fixed window's next
   * window is never touched.
   */
  decrement(key: string, cost: number, windowMs: number, now: number): void {
    const group = this.groups.get(windowMs)
    if (group === undefined) return
    const index = windowIndex(now, windowMs)
    const counts = index === group.index ? group.counts : index === group.index - 1 && group.previous !== EMPTY ? group.previous : undefined
    if (counts === undefined) return
    const cell = counts.get(this.bound.keyIn(counts, key))
    if (cell !== undefined && cell.w === index && cell.n > 0) cell.n -= Math.min(cell.n, cost)
  }

  /**
   * Moves `key`'s count in the window containing `now` (an admitted call's) by `delta`, up even past a
   * limit, down never below zero, if `settled` (the settle's time) lies in that window and this store
   * has counted no later window of that length: a later window reads a sliding window's previous one,
   * which must then stay as it was read.
   */
  settle(key: string, delta: number, windowMs: number, now: number, settled: number, sliding: boolean): void {
    const index = windowIndex(now, windowMs)
    if (windowIndex(settled, windowMs) !== index) return
    const group = this.groups.get(windowMs)
    if (group !== undefined && group.index > index) return
    if (delta > 0) {
      this.current(windowMs, now, sliding)
      this.increment(key, delta, windowMs, now)
    } else this.decrement(key, -delta, windowMs, now)
  }

  /**
   * Raises `key`'s count in the window containing `now` to `count` (and, for a sliding window, the
   * previous window's to `previous`), never lowering either: another store's count carried over.
   */
  seed(key: string, windowMs: number, now: number, count: number, previous?: number): void {
    const group = this.current(windowMs, now, previous !== undefined)
    const index = group.index
    if (index !== windowIndex(now, windowMs)) return // the clock stepped back: keep the newer window
    const held = this.held(group, key)
    raise(group.counts, held, count, index)
    if (previous !== undefined && previous > countIn(group.previous, held, index - 1)) {
      if (group.previous === EMPTY) group.previous = new Map()
      raise(group.previous, held, previous, index - 1)
    }
  }

  /** Forgets `key`'s counts: set to 0 in place, so a holder of the cell sees the reset too. */
  delete(key: string, windowMs: number): void {
    const group = this.groups.get(windowMs)
    if (group === undefined) return
    const cell = group.counts.get(key)
    if (cell !== undefined) cell.n = 0
    const previous = group.previous.get(key)
    if (previous !== undefined) previous.n = 0
  }

  /** Drops every count of a window that has ended by `now`. */
  prune(now: number): void {
    for (const [windowMs, group] of this.groups) {
      const index = windowIndex(now, windowMs)
      if (index > group.index + 1) {
        this.groups.delete(windowMs)
        if (this.lastMs === windowMs) this.lastMs = -1
      } else if (index === group.index + 1) {
        // No count yet in the new window: every cell held is of an ended one.
        group.previous = group.sliding ? group.counts : EMPTY
        group.counts = new Map()
        group.index = index
      } else if (!group.sliding) {
        dropEnded(group)
      }
    }
  }

  /** Clients with a count in a window that has not ended (as of the last count or prune). */
  get size(): number {
    let n = 0
    for (const group of this.groups.values()) {
      for (const cell of group.counts.values()) if (cell.w === group.index) n++
      for (const cell of group.previous.values()) if (cell.w === group.index - 1) n++
    }
    return n
  }
}

/** The count held under `key` for window `w` in `counts`, 0 when none is. */
export function countIn(counts: ReadonlyMap<string, Cell>, key: string, w: number): number {
  const cell = counts.get(key)
  return cell !== undefined && cell.w === w ? cell.n : 0
}

function raise(counts: Map<string, Cell>, key: string, count: number, w: number): void {
  const cell = counts.get(key)
  if (cell === undefined) counts.set(key, { n: count, w })
  else if (cell.w !== w) {
    cell.n = count
    cell.w = w
  } else if (count > cell.n) cell.n = count
}

/** Deletes the cells of `group`'s fixed window that count an ended window. */
function dropEnded(group: Group): void {
  const { counts, index } = group
  for (const [key, cell] of counts) if (cell.w !== index) counts.delete(key)
}

export interface Group {
  index: number
  counts: Map<string, Cell>
  /** Counts of window index − 1, kept only once a sliding-window limit uses this window length. */
  previous: Map<string, Cell>
  sliding: boolean
  /** The window in which the map last filled up and dropped its ended cells (`held`). */
  full: number
}

const EMPTY: Map<string, Cell> = new Map()

/**
 * The memory twin of a window algorithm: its own read and write over the shared windows; refund,
 * settle and forget are the same for both (the current window's counter of each limit).
 */
export function windowTwin(windows: Windows, own: Pick<MemoryTwin, 'read' | 'write' | 'seed'>, sliding: boolean): MemoryTwin {
  return {
    read: own.read,
    write: own.write,
    seed: own.seed,
    refund: (call, i) => windows.decrement(stem(call, i), call.cost, call.limits[i]!.windowMs, call.now),
    settle: (call, i, actual, now) => windows.settle(stem(call, i), actual - call.cost, call.limits[i]!.windowMs, call.now, now, sliding),
    forget: (call, i) => windows.delete(stem(call, i), call.limits[i]!.windowMs),
    prune() {}, // the store prunes the shared windows
    size: 0, // counted by the store, with the shared windows
  }
}

/** A window algorithm's numbers when the store is unavailable: an empty (allow) or a full (deny) counter. */
export function counterUnavailable(limit: LimitSpec, _now: number, allow: boolean, values: number[]): void {
  const n = allow ? 0 : limit.max
  values.push(n, n)
}
