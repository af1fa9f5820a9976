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
