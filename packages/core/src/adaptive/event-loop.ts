/*
 * The gate's second signal: the event loop's utilisation over an interval, where the runtime reports it (Node's
 * performance.eventLoopUtilization). A loop busy nearly all the time answers late whatever the limit, so such an
 * interval counts as overloaded even when the latency measured from admission looks fine.
 */

type Elu = { idle: number; active: number; utilization: number }

/** The share of time the event loop was busy since the previous reading, read once an interval. */
export class EventLoopUse {
  private last: Elu | undefined

  /** undefined where the runtime does not report it. */
  static start(): EventLoopUse | undefined {
    const first = read()
    return first === undefined ? undefined : new EventLoopUse(first)
  }

  private constructor(first: Elu) {
    this.last = first
  }

  /** The utilisation (0 to 1) since the last call. */
  sinceLast(): number {
    const now = read()
    const before = this.last
    this.last = now
    if (now === undefined || before === undefined) return 0
    const idle = now.idle - before.idle
    const active = now.active - before.active
    return idle + active > 0 ? active / (idle + active) : 0
  }
}

function read(): Elu | undefined {
  const perf = (globalThis as { performance?: { eventLoopUtilization?: () => Elu } }).performance
  return typeof perf?.eventLoopUtilization === 'function' ? perf.eventLoopUtilization() : undefined
}
