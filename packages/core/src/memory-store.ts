import { type ConsumeCall, type ConsumeResult, stem } from './algorithms'
import { describeValue, invalidOption, TollgateError } from './errors'
import { type Store, windowIndex } from './store'

export interface MemoryStoreOptions {
  /**
   * How often stale windows are dropped when no request arrives to do it, in ms. One timer per
   * store (unref'd, so it never keeps the process alive), never one per key. 0 turns the sweep off
   * (windows are then still replaced when a request reaches the next one).
   * @default 5000
   */
  sweepIntervalMs?: number
  /** Clock used by the sweep, for tests. @default Date.now */
  clock?: () => number
}

interface WindowCounts {
  index: number
  counts: Map<string, number>
  /** Counts of window index − 1, kept only once a sliding-window limit uses this window length. */
  previous: Map<string, number>
  sliding: boolean
}

interface Log {
  windowMs: number
  /** Admission times, ascending, one per unit. */
  times: number[]
  /** The call id and unit of each entry, so a refund removes exactly its own. */
  members: string[]
}

const EMPTY: Map<string, number> = new Map()

const OPTION_KEYS = ['sweepIntervalMs', 'clock']

/** Node's timers take at most 2^31 − 1 ms; a longer delay silently becomes 1 ms, a sweep every tick. */
const MAX_TIMER_MS = 2_147_483_647

/**
 * A GCRA theoretical arrival time, exactly: `ms + rem / max` epoch ms, with 0 ≤ rem < max. The
 * emission interval T = window / max is rarely a whole number of ms (1000 / 3); rounding the TAT to
 * a whole ms at each request lost up to 1 ms per request, which cost a unit of burst (3 per second
 * admitted 2 at once) and slowed the steady rate. Kept as two integers, the arithmetic never rounds.
 * The Redis script (GCRA_SCRIPT) stores the same pair as "ms:rem" and computes it the same way.
 */
interface Tat {
  readonly ms: number
  readonly rem: number
}

/** `tat + units / max` ms, exactly; `units` is negative for a refund. */
function addUnits(tat: Tat, units: number, max: number): Tat {
  const sum = tat.rem + units
  const carry = Math.floor(sum / max)
  return { ms: tat.ms + carry, rem: sum - carry * max }
}

/** True when the TAT lies after `now` (a whole ms), i.e. the bucket is not full. */
function isAfter(tat: Tat, now: number): boolean {
  return tat.ms > now || (tat.ms === now && tat.rem > 0)
}

/** The TAT as the number of ms decisionOf reads (see GCRA_SCRIPT for why it may be fractional). */
function tatMs(tat: Tat, max: number): number {
  return max > 0 ? tat.ms + tat.rem / max : tat.ms
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
  /** GCRA theoretical arrival times. */
  private readonly tats = new Map<string, Tat>()
  private readonly logs = new Map<string, Log>()
  private readonly clock: () => number
  private timer: NodeJS.Timeout | undefined

  constructor(options: MemoryStoreOptions = {}) {
    // Checked here, not when the sweep timer first fires: a bad clock would otherwise surface as a
    // TypeError from inside a timer, seconds later and far from the code that passed it.
    if (options === null || typeof options !== 'object' || Array.isArray(options)) {
      throw new TollgateError(
        `Invalid MemoryStore options: expected an object like { sweepIntervalMs }, got ${describeValue(options)}`,
        'TG_INVALID_OPTION',
      )
    }
    for (const name of Object.keys(options)) {
      if (!OPTION_KEYS.includes(name)) {
        throw new TollgateError(`Unknown MemoryStore option "${name}"; known options: ${OPTION_KEYS.join(', ')}`, 'TG_UNKNOWN_OPTION')
      }
    }
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
    this.clock = clock ?? Date.now
    const every = sweepIntervalMs ?? 5000
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

  /**
   * The memory twin of the Redis scripts in redis-commands.ts: check every limit, then update all or
   * none, with the same arithmetic, so both stores decide alike.
   */
  consume(call: ConsumeCall): ConsumeResult {
    const { cost, now, limits } = call
    const values: number[] = []
    let ok = true
    switch (call.algorithm) {
      case 'fixed-window':
      case 'sliding-window': {
        const sliding = call.algorithm === 'sliding-window'
        for (let i = 0; i < limits.length; i++) {
          const { max, windowMs: w } = limits[i]!
          const group = this.group(w, now)
          if (sliding) group.sliding = true
          const key = stem(call, i)
          const cur = group.counts.get(key) ?? 0
          if (sliding) {
            const prev = group.previous.get(key) ?? 0
            const e = now - Math.floor(now / w) * w
            values.push(prev, cur)
            if (prev * (w - e) + (cur + cost) * w > max * w) ok = false
          } else {
            values.push(cur, cur)
            if (cur + cost > max) ok = false
          }
        }
        if (ok) {
          for (let i = 0; i < limits.length; i++) {
            const counts = this.group(limits[i]!.windowMs, now).counts
            const key = stem(call, i)
            const count = (counts.get(key) ?? 0) + cost
            counts.set(key, count)
            if (!sliding) values[2 * i + 1] = count
          }
        }
        break
      }
      case 'gcra': {
        const next: Tat[] = []
        for (let i = 0; i < limits.length; i++) {
          const { max, windowMs: w, burst } = limits[i]!
          const stored = this.tats.get(`${stem(call, i)}:gcra`)
          const before = stored !== undefined && isAfter(stored, now) ? stored : { ms: now, rem: 0 }
          let after = before
          if (max > 0) {
            after = addUnits(before, cost * w, max)
            // TAT − burst × T > now, multiplied through by max so that it is exact.
            if ((after.ms - now) * max + after.rem > burst * w) ok = false
          } else ok = false
          values.push(tatMs(before, max), tatMs(after, max))
          next.push(after)
        }
        if (ok) for (let i = 0; i < limits.length; i++) this.tats.set(`${stem(call, i)}:gcra`, next[i]!)
        break
      }
      case 'sliding-log': {
        const logs: Log[] = []
        for (let i = 0; i < limits.length; i++) {
          const { max, windowMs: w } = limits[i]!
          const log = this.log(`${stem(call, i)}:log`, w)
          let drop = 0
          while (drop < log.times.length && log.times[drop]! <= now - w) drop++
          if (drop > 0) {
            log.times.splice(0, drop)
            log.members.splice(0, drop)
          }
          const c = log.times.length
          const idx = Math.max(0, c + cost - max - 1)
          values.push(c, log.times[idx] ?? now)
          if (c + cost > max) ok = false
          logs.push(log)
        }
        if (ok) {
          for (const log of logs) {
            for (let j = 1; j <= cost; j++) {
              // Keep times ascending even if the clock steps back.
              let at = log.times.length
              while (at > 0 && log.times[at - 1]! > now) at--
              log.times.splice(at, 0, now)
              log.members.splice(at, 0, `${call.id}:${j}`)
            }
          }
        }
        break
      }
    }
    return { allowed: ok, values }
  }

  /** Undoes an admitted `consume` (or `increment`) call, within its own window only, never below zero. */
  refund(call: ConsumeCall): void {
    const { cost, now, limits } = call
    for (let i = 0; i < limits.length; i++) {
      const { max, windowMs: w } = limits[i]!
      const key = stem(call, i)
      if (call.algorithm === 'fixed-window' || call.algorithm === 'sliding-window') {
        const group = this.groups.get(w)
        if (group === undefined || group.index !== windowIndex(now, w)) continue
        const c = group.counts.get(key)
        if (c !== undefined && c > 0) group.counts.set(key, c - Math.min(c, cost))
      } else if (call.algorithm === 'gcra') {
        const stored = this.tats.get(`${key}:gcra`)
        if (stored === undefined || max <= 0) continue
        const back = addUnits(stored, -cost * w, max)
        if (isAfter(back, now)) this.tats.set(`${key}:gcra`, back)
        else this.tats.delete(`${key}:gcra`)
      } else {
        const log = this.logs.get(`${key}:log`)
        if (log === undefined) continue
        for (let j = 1; j <= cost; j++) {
          const at = log.members.indexOf(`${call.id}:${j}`)
          if (at !== -1) {
            log.times.splice(at, 1)
            log.members.splice(at, 1)
          }
        }
      }
    }
  }

  /** Forgets everything a call's client has in this store for the call's limits. */
  forget(call: ConsumeCall): void {
    for (let i = 0; i < call.limits.length; i++) {
      const key = stem(call, i)
      const group = this.groups.get(call.limits[i]!.windowMs)
      group?.counts.delete(key)
      group?.previous.delete(key)
      this.tats.delete(`${key}:gcra`)
      this.logs.delete(`${key}:log`)
    }
  }

  /** Drops every window that has ended by `now`, full GCRA buckets and empty logs. Runs on a timer; callable in tests. */
  prune(now: number): void {
    for (const [windowMs, group] of this.groups) {
      const index = windowIndex(now, windowMs)
      if (index > group.index + 1) this.groups.delete(windowMs)
      else if (index === group.index + 1) {
        group.previous = group.sliding ? group.counts : EMPTY
        group.counts = new Map()
        group.index = index
      }
    }
    for (const [key, tat] of this.tats) if (!isAfter(tat, now)) this.tats.delete(key)
    for (const [key, log] of this.logs) {
      if (log.times.length === 0 || log.times[log.times.length - 1]! <= now - log.windowMs) this.logs.delete(key)
    }
  }

  /** Number of client entries held (window counts, GCRA buckets, logs). */
  get size(): number {
    let n = this.tats.size + this.logs.size
    for (const group of this.groups.values()) n += group.counts.size + group.previous.size
    return n
  }

  /** Stops the sweep timer. Only needed to end a process cleanly in tests; the timer is unref'd. */
  shutdown(): void {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
  }

  private current(windowMs: number, now: number): Map<string, number> {
    return this.group(windowMs, now).counts
  }

  private group(windowMs: number, now: number): WindowCounts {
    const index = windowIndex(now, windowMs)
    let group = this.groups.get(windowMs)
    if (group === undefined) {
      group = { index, counts: new Map(), previous: EMPTY, sliding: false }
      this.groups.set(windowMs, group)
    } else if (index > group.index) {
      // The window ended: drop all its counts at once (keeping them one window for sliding windows).
      group.previous = group.sliding && index === group.index + 1 ? group.counts : EMPTY
      group.index = index
      group.counts = new Map()
    }
    // index < group.index happens only if the clock steps back; counting into the newest window
    // keeps the count conservative instead of reopening an old one.
    return group
  }

  private log(key: string, windowMs: number): Log {
    let log = this.logs.get(key)
    if (log === undefined) {
      log = { windowMs, times: [], members: [] }
      this.logs.set(key, log)
    }
    return log
  }
}
