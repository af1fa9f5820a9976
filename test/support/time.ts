/** A clock a test moves by hand: pass `read` as the limiter's `clock`. */
export interface TestClock {
  now: number
  readonly read: () => number
}

export function testClock(now = 0): TestClock {
  const clock = { now, read: () => clock.now }
  return clock
}

/**
 * Waits on real time. Only for what no injected clock reaches: a real server frozen, killed or
 * restarted, a socket closing, a timer inside a client library. A window or a block moves with
 * `testClock` instead.
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * Real elapsed time for a fault test against a real server, starting 1 s into a window of `windowMs`
 * aligned to the clock: the window cannot turn during a test shorter than it (a new window would rightly
 * admit more and hide what the test looks for).
 */
export function clockInOneWindow(windowMs: number): () => number {
  const origin = Math.ceil(Date.now() / windowMs) * windowMs + 1000
  const t0 = performance.now()
  return () => origin + (performance.now() - t0)
}
