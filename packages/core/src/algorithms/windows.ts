import { stem, windowIndex } from '../keys'
import type { LimitSpec } from '../types'
import type { MemoryBound } from './memory-bound'
import { LUA_REPLY, type MemoryTwin, TTL_MARGIN_MS } from './protocol'

/**
 * One client's count in one window. The maps hold these rather than numbers, so counting a client
 * already held is one lookup and one add (no second hashing to write the sum back), and a holder of
 * the cell (the limiter's own lookup of its clients, see counting.ts) counts without the map at all.
 * A cell is only ever changed in place: every holder reads the same count.
 */
export interface Cell {
  n: number
}

/**
 * Counts per window length, for the two window algorithms and the batched fixed window of the memory
 * store. Each group holds only the current window (and, once a sliding window uses the length, the
 * previous one): when time reaches the next window the whole map is replaced, so expired counts are
 * freed in one step, without a timer or an expiry field per key. There is no LRU: a flood of new keys
 * costs memory for one window but can never evict, and so never reset, another client's count.
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
      group = { index, counts: new Map(), previous: EMPTY, sliding }
      this.groups.set(windowMs, group)
    } else if (index > group.index) {
      // The window ended: drop all its counts at once (keeping them one window for sliding windows).
      group.previous = group.sliding && index === group.index + 1 ? group.counts : EMPTY
      group.index = index
      group.counts = new Map()
    }
    // index < group.index happens only if the clock steps back; counting into the newest window
    // keeps the count conservative instead of reopening an old one.
    if (sliding) group.sliding = true
    this.last = group
    this.lastMs = windowMs
    return group
  }

  /**
   * `key`'s cell in the window containing `now`, created at 0 when new; the shared overflow cell once
   * the map is full (memory-bound.ts). It holds the count of that window only: a holder must stop
   * using it when the window ends.
   */
  cell(key: string, windowMs: number, now: number): Cell {
    const counts = this.current(windowMs, now).counts
    let cell = counts.get(key)
    if (cell === undefined) {
      const held = this.bound.keyIn(counts, key)
      cell = held === key ? undefined : counts.get(held)
      if (cell === undefined) {
        cell = { n: 0 }
        counts.set(held, cell)
      }
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
    const counts = this.current(windowMs, now).counts
    return countIn(counts, this.bound.keyIn(counts, key))
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
    if (cell !== undefined && cell.n > 0) cell.n -= Math.min(cell.n, cost)
  }

  /**
   * Raises `key`'s count in the window containing `now` to `count` (and, for a sliding window, the
   * previous window's to `previous`), never lowering either: another store's count carried over.
   */
  seed(key: string, windowMs: number, now: number, count: number, previous?: number): void {
    const group = this.current(windowMs, now, previous !== undefined)
    if (group.index !== windowIndex(now, windowMs)) return // the clock stepped back: keep the newer window
    const held = this.bound.keyIn(group.counts, key)
    raise(group.counts, held, count)
    if (previous !== undefined && previous > countIn(group.previous, held)) {
      if (group.previous === EMPTY) group.previous = new Map()
      raise(group.previous, held, previous)
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

  /** Drops every window that has ended by `now`. */
  prune(now: number): void {
    for (const [windowMs, group] of this.groups) {
      const index = windowIndex(now, windowMs)
      if (index > group.index + 1) {
        this.groups.delete(windowMs)
        if (this.lastMs === windowMs) this.lastMs = -1
      } else if (index === group.index + 1) {
        group.previous = group.sliding ? group.counts : EMPTY
        group.counts = new Map()
        group.index = index
      }
    }
  }

  get size(): number {
    let n = 0
    for (const group of this.groups.values()) n += group.counts.size + group.previous.size
    return n
  }
}

/** The count held under `key` in `counts`, 0 when none is. */
export function countIn(counts: ReadonlyMap<string, Cell>, key: string): number {
  return counts.get(key)?.n ?? 0
}

function raise(counts: Map<string, Cell>, key: string, count: number): void {
  const cell = counts.get(key)
  if (cell === undefined) counts.set(key, { n: count })
  else if (count > cell.n) cell.n = count
}

export interface Group {
  index: number
  counts: Map<string, Cell>
  /** Counts of window index − 1, kept only once a sliding-window limit uses this window length. */
  previous: Map<string, Cell>
  sliding: boolean
}

const EMPTY: Map<string, Cell> = new Map()

/**
 * Refund of the window algorithms in Lua: DECRBY the current window's key of each limit (the first of
 * its `step` keys), never below zero. DECRBY keeps the TTL. A later window has other keys, so a refund
 * arriving after the edge changes nothing.
 */
export function counterRefundScript(step: number): string {
  return `
local cost = tonumber(ARGV[1])
for i = 1, #KEYS / ${step} do
  local key = KEYS[(i - 1) * ${step} + 1]
  local c = tonumber(redis.call('GET', key))
  if c and c > 0 then redis.call('DECRBY', key, math.min(c, cost)) end
end
return 1`
}

/**
 * The memory twin of a window algorithm: its own read and write over the shared windows; refund and
 * forget are the same for both (the current window's counter of each limit).
 */
export function windowTwin(windows: Windows, own: Pick<MemoryTwin, 'read' | 'write' | 'seed'>): MemoryTwin {
  return {
    read: own.read,
    write: own.write,
    seed: own.seed,
    refund: (call, i) => windows.decrement(stem(call, i), call.cost, call.limits[i]!.windowMs, call.now),
    forget: (call, i) => windows.delete(stem(call, i), call.limits[i]!.windowMs),
    prune() {}, // the store prunes the shared windows
    size: 0, // counted by the store, with the shared windows
  }
}

/**
 * The write half of a window algorithm's admit script, run once every limit fits, for the current
 * window's key of each limit (the first of its `step` keys). First every key is created with its TTL,
 * `windowsAhead` window ends from now plus the margin (`SET key 0 PX ttl NX`, which leaves an existing
 * key and its TTL alone); only then is each counted (INCRBY keeps the TTL). A script is not rolled back
 * when Redis refuses one of its commands (ACL, maxmemory): with the TTL set before any count, a refusal
 * at any step leaves every key it touched with a TTL (#12), where INCRBY-then-PEXPIRE left a count that
 * never expired. With `report`, the count after the INCRBY replaces the limit's second number.
 */
export function counterWrites(step: number, windowsAhead: number, report: boolean): string {
  return `
if ok == 1 then
  for i = 1, #KEYS / ${step} do
    local w = tonumber(ARGV[3 * i + 2])
    redis.call('SET', KEYS[(i - 1) * ${step} + 1], '0', 'PX', (math.floor(now / w) + ${windowsAhead}) * w - now + ${TTL_MARGIN_MS}, 'NX')
  end
  for i = 1, #KEYS / ${step} do
    local count = redis.call('INCRBY', KEYS[(i - 1) * ${step} + 1], cost)
    ${report ? 'out[2 * i + 1] = count' : ''}
  end
end${LUA_REPLY}`
}

/** A window algorithm's numbers when the store is unavailable: an empty (allow) or a full (deny) counter. */
export function counterUnavailable(limit: LimitSpec, _now: number, allow: boolean, values: number[]): void {
  const n = allow ? 0 : limit.max
  values.push(n, n)
}
