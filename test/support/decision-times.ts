import type { Decision, Limiter } from '@tollgate/core'
import { isThenable } from '@tollgate/core/adapter'

/** One `check` of a limiter, timed inside the process that runs it. */
export interface TimedDecision {
  /** Wall time from the call of `check` to its decision (the returned promise settling), in ms. */
  ms: number
  /** The part of `ms` during which this process's event loop was stalled (see `timeDecisions`), in ms. */
  stalledMs: number
  /** `ms - stalledMs`: the limiter's own time, what its store deadline bounds. */
  ownMs: number
  /** Where the decision came from; `"error"` when `check` rejected. */
  source: Decision['source'] | 'error'
  /** Wall-clock time the decision was made, in epoch ms. */
  at: number
}

export interface DecisionTimer {
  /** Every decision timed so far, with its stalls accounted. */
  decisions(): TimedDecision[]
  /** The longest stall of the event loop seen so far, in ms (how loaded the run was). */
  longestStallMs(): number
  /** Removes the wrapper and stops the heartbeat. Idempotent. */
  stop(): void
}

/** Heartbeat period: a tick later than this means the event loop did not get back to its timers. */
const HEARTBEAT_MS = 10

/**
 * Times every decision `limiter` makes from now on, inside this process: from the call of `check`
 * to its decision, with no HTTP in it (a bound on the HTTP round trip also measured connection setup
 * and the load loop: 232-250 ms against < 200 on a loaded 2-core machine).
 *
 * A deadline is a timer, and no timer of a process runs while the process is descheduled or its event
 * loop is busy elsewhere: on a loaded machine a decision can settle hundreds of ms late having waited
 * for nothing but the CPU. A heartbeat timer measures those stalls (each tick later than its period),
 * and the stalled part of a decision's wall time is set apart as `stalledMs`. What is left, `ownMs`,
 * is the time the limiter waited with the process running: a decision held by the Redis client's
 * offline queue or its retries waits with the event loop running freely, so all of that wait stays in
 * `ownMs`.
 *
 * `check` is wrapped on the instance (adapters call `limiter.check(req)`), and what it returns is
 * passed on untouched.
 */
export function timeDecisions<Req>(limiter: Limiter<Req>): DecisionTimer {
  const raw: Array<{ start: number; end: number; source: TimedDecision['source']; at: number }> = []
  // [from, to] spans (performance.now()) during which the heartbeat was overdue.
  const stalls: Array<[number, number]> = []
  let last = performance.now()
  const heartbeat = setInterval(() => {
    const now = performance.now()
    if (now - last > HEARTBEAT_MS) stalls.push([last + HEARTBEAT_MS, now])
    last = now
  }, HEARTBEAT_MS)
  heartbeat.unref()

  const check = limiter.check
  const record = (start: number, source: TimedDecision['source']) =>
    void raw.push({ start, end: performance.now(), source, at: Date.now() })
  limiter.check = function timedCheck(this: Limiter<Req>, req: Req) {
    const start = performance.now()
    const result = check.call(this, req)
    if (!isThenable(result)) {
      if (result !== undefined) record(start, result.source)
      return result
    }
    // A branch of its own: the caller still gets the original promise, and sees its rejection.
    result.then(
      (decision) => decision !== undefined && record(start, decision.source),
      () => record(start, 'error'),
    )
    return result
  }

  const stalledWithin = (start: number, end: number) => {
    let total = 0
    for (const [from, to] of stalls) total += Math.max(0, Math.min(end, to) - Math.max(start, from))
    return total
  }
  return {
    decisions: () =>
      raw.map(({ start, end, source, at }) => {
        const ms = end - start
        const stalledMs = stalledWithin(start, end)
        return { ms, stalledMs, ownMs: ms - stalledMs, source, at }
      }),
    longestStallMs: () => Math.max(0, ...stalls.map(([from, to]) => to - from + HEARTBEAT_MS)),
    stop() {
      clearInterval(heartbeat)
      limiter.check = check
    },
  }
}
