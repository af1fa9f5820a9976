import { stem } from '../keys'
import type { StoreCall } from '../types'
import type { MemoryTwin } from './protocol'
import type { Windows } from './windows'

/*
 * The memory twin's sorted set, for the algorithms that keep one entry per unit scored by its time (the
 * sliding log, the concurrency algorithm's slots): what a Redis ZSET of `<call id>:<unit>` members gives
 * their scripts.
 */

export interface TimeLog {
  readonly windowMs: number
  /** Entry times, ascending, one per unit. */
  readonly times: number[]
  /** The call id and unit of each entry, so a refund or a release removes exactly its own. */
  readonly members: string[]
}

/** A MemoryStore's logs of one algorithm, by key, within the store's memory bound. */
export class TimeLogs {
  private readonly logs = new Map<string, TimeLog>()

  constructor(private readonly windows: Windows) {}

  /** Limit `i`'s log of `call`, made empty when missing. */
  of(call: StoreCall, i: number): TimeLog {
    const key = this.windows.bound.keyIn(this.logs, stem(call, i))
    let log = this.logs.get(key)
    if (log === undefined) {
      log = { windowMs: call.limits[i]!.windowMs, times: [], members: [] }
      this.logs.set(key, log)
    }
    return log
  }

  /** Limit `i`'s log of `call`, if there is one. */
  find(call: StoreCall, i: number): TimeLog | undefined {
    return this.logs.get(this.windows.bound.keyIn(this.logs, stem(call, i)))
  }

  forget(call: StoreCall, i: number): void {
    this.logs.delete(stem(call, i))
  }

  /** Drops the logs whose newest entry has left its window. */
  prune(now: number): void {
    for (const [key, log] of this.logs) {
      if (log.times.length === 0 || log.times[log.times.length - 1]! <= now - log.windowMs) this.logs.delete(key)
    }
  }

  get size(): number {
    return this.logs.size
  }

  /**
   * The memory twin over these logs, as the admit script (log-scripts.ts) reads and writes them: the numbers
   * are the entries in the window and the time of the entry whose expiry frees enough room, or, when the
   * call fills the log and the algorithm reads it (`full`), the oldest entry's time, else the call's; an
   * admitted call adds an entry per unit, named
   * by its id. The algorithm gives its own seed and settle; a refund removes the entries the call's id names.
   */
  twin(full: boolean, own: Pick<MemoryTwin, 'seed' | 'settle'>): MemoryTwin {
    const logs = this
    return {
      read(call, i, values) {
        const { max, windowMs } = call.limits[i]!
        const log = logs.of(call, i)
        const c = trim(log, call.now - windowMs)
        const at = c + call.cost - max - 1
        values.push(c, at >= (full ? -1 : 0) && at < c && c > 0 ? log.times[Math.max(0, at)]! : call.now)
        return c + call.cost <= max
      },
      write(call, i) {
        const log = logs.of(call, i)
        for (let j = 1; j <= call.cost; j++) addEntry(log, call.now, `${call.id}:${j}`)
      },
      seed: own.seed,
      settle: own.settle,
      refund(call, i) {
        const log = logs.find(call, i)
        for (let j = 1; j <= call.cost; j++) removeMember(log, `${call.id}:${j}`)
      },
      forget: (call, i) => logs.forget(call, i),
      prune: (now) => logs.prune(now),
      get size() {
        return logs.size
      },
    }
  }
}

/** Removes the entries at or before `cutoff` (they left the window); returns how many are left. */
export function trim(log: TimeLog, cutoff: number): number {
  let drop = 0
  while (drop < log.times.length && log.times[drop]! <= cutoff) drop++
  if (drop > 0) {
    log.times.splice(0, drop)
    log.members.splice(0, drop)
  }
  return log.times.length
}

/** Adds `member` at `now`, keeping the times ascending even if the clock steps back. */
export function addEntry(log: TimeLog, now: number, member: string): void {
  let at = log.times.length
  while (at > 0 && log.times[at - 1]! > now) at--
  log.times.splice(at, 0, now)
  log.members.splice(at, 0, member)
}

/** Removes the entry at `at`. */
export function removeAt(log: TimeLog, at: number): void {
  log.times.splice(at, 1)
  log.members.splice(at, 1)
}

/** Removes `member`, if the log holds it. */
export function removeMember(log: TimeLog | undefined, member: string): void {
  const at = log === undefined ? -1 : log.members.indexOf(member)
  if (at !== -1) removeAt(log!, at)
}
