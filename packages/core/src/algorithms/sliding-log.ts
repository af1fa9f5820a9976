import type { LimitSpec } from '../types'
import type { Algorithm } from './algorithm'
import { type MemoryTwin, oneKeyPerLimit, type Verdict } from './protocol'
import { addEntry, removeMember, TimeLogs } from './time-log'
import type { Windows } from './windows'

/*
 * Sliding log: exact rolling window, one entry per admitted unit, scored by time. One key per limit,
 * `<stem>:log` (a sorted set in Redis). Entries at or before now − W leave.
 * The store's numbers per limit: [entries before, time of the entry whose expiry frees enough room] (for
 * an exact Retry-After), or, when the call fills the log, the oldest entry's time, else the call's. Its Lua, shared with concurrency, is in log-scripts.ts.
 */

function memory(windows: Windows): MemoryTwin {
  const logs = new TimeLogs(windows)
  return logs.twin(true, {
    seed(call, i, a, _b, admitted) {
      // The store's entries cannot be copied, only counted: the missing ones are added at `now`, so
      // they leave later than the store's would. The fallback then refuses a little longer, never admits more.
      const log = logs.of(call, i)
      for (let n = log.times.length; n < (admitted ? a + call.cost : a); n++) addEntry(log, call.now, `seed:${call.id}:${n}`)
    },
    settle(call, i, actual, now) {
      if (now >= call.now + call.limits[i]!.windowMs) return
      const log = actual > call.cost ? logs.of(call, i) : logs.find(call, i)
      // Higher: the entries the call lacks, at its own time, those the log does not hold already (a
      // sorted set holds a member once); lower, the call's last entries.
      for (let j = call.cost + 1; j <= actual; j++)
        if (!log!.members.includes(`${call.id}:${j}`)) addEntry(log!, call.now, `${call.id}:${j}`)
      for (let j = actual + 1; j <= call.cost; j++) removeMember(log, `${call.id}:${j}`)
    },
  })
}

function verdict(out: Verdict, limit: LimitSpec, a: number, b: number, cost: number, now: number, admitted: boolean): void {
  const { max, windowMs: W } = limit
  out.fits = a + cost <= max
  out.count = a + cost
  out.remaining = Math.max(0, max - (admitted ? a + cost : a))
  // The reset is when the whole quota is back, as every algorithm's is, except when the call leaves no unit
  // (or does not fit): then it is when the next unit frees, the oldest entry's leaving (the store reads
  // that entry only then: a decision with units left costs Redis a count and a ZADD).
  out.resetAt = a > 0 && a + cost >= max && cost <= max ? b + W : now + W
  out.retryAfterMs = out.fits ? 0 : cost > max ? W : Math.max(1, b + W - now)
}

export const slidingLog: Algorithm = {
  name: 'sliding-log',
  burst: false,
  refundsByCallId: true,
  keys: /* @__PURE__ */ oneKeyPerLimit('log'),
  settleKeys: /* @__PURE__ */ oneKeyPerLimit('log'),
  memory,
  verdict,
  unavailable(limit, now, allow, values) {
    values.push(allow ? 0 : limit.max, now)
  },
}
