import { AdaptiveGate, type AdaptiveGateConfig, Permit, type Priority, type Shed } from '../../packages/core/src/adaptive/gate'

// The gate against a simulated service on a virtual clock (Jest's fake timers): a handler that serves
// `capacity` requests at a time, each in SERVICE_MS, the rest waiting inside it first come first served, as
// a database pool or a worker pool does. Offered three times what it can serve, with a mix of classes.

const SERVICE_MS = 20

/** Each request's service time: 15 to 25 ms, from a fixed pseudo-random sequence (the same in every run). */
function serviceTimes(): () => number {
  let x = 12345
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31
    return 15 + (x % 11)
  }
}

interface Outcome {
  priority: Priority
  at: number
  latencyMs?: number
  shed?: Shed['reason']
}

function config(overrides: Partial<AdaptiveGateConfig> = {}): AdaptiveGateConfig {
  return {
    algorithm: 'gradient2',
    initialLimit: 20,
    minLimit: 2,
    maxLimit: 1000,
    tolerance: 1.2,
    queueTimeoutMs: undefined,
    maxQueue: undefined,
    eventLoopUtilization: undefined,
    intervalMs: 100,
    baselineWindowMs: 30_000,
    clock: () => Date.now(),
    ...overrides,
  }
}

/** Runs the simulation for `seconds`; `capacityAt(t)` is the handler's capacity at second t. */
async function simulate(
  gate: AdaptiveGate,
  seconds: number,
  offeredPerSecond: number,
  capacityAt: (t: number) => number,
): Promise<Outcome[]> {
  const start = Date.now()
  const outcomes: Outcome[] = []
  let running = 0
  const waiting: Array<() => void> = []
  const took = serviceTimes()
  const serve = (done: () => void) => {
    running++
    setTimeout(() => {
      running--
      done()
      const capacity = capacityAt((Date.now() - start) / 1000)
      while (running < capacity && waiting.length > 0) waiting.shift()!()
    }, took())
  }
  const handle = (priority: Priority) => {
    const at = Date.now()
    const settle = (answer: Permit | Shed) => {
      if (!(answer instanceof Permit)) {
        outcomes.push({ priority, at, shed: answer.reason })
        return
      }
      const done = () => {
        outcomes.push({ priority, at, latencyMs: Date.now() - at })
        answer.release()
      }
      if (running < capacityAt((Date.now() - start) / 1000)) serve(done)
      else waiting.push(() => serve(done))
    }
    const answer = gate.acquire(priority)
    if (answer instanceof Promise) void answer.then(settle)
    else settle(answer)
  }
  // A fixed mix, 20% critical, 50% normal, 30% sheddable, evenly spread.
  const mix: Priority[] = ['critical', 'normal', 'sheddable', 'normal', 'sheddable', 'normal', 'critical', 'normal', 'sheddable', 'normal']
  // Arrivals in ticks of one ms (the clock's resolution), each arrival's tick scheduling the next, so
  // only a few timers are pending at once.
  const endAt = start + seconds * 1000
  let n = 0
  let owed = 0
  const tick = () => {
    owed += offeredPerSecond / 1000
    for (; owed >= 1; owed--) handle(mix[n++ % mix.length]!)
    if (Date.now() < endAt) setTimeout(tick, 1)
  }
  tick()
  await jest.advanceTimersByTimeAsync(seconds * 1000 + 1000)
  return outcomes
}

/** The p99 of the service alone, 25 ms (its longest service time; at half load nothing waits). */
const UNLOADED_P99_MS = 25

function p99(latencies: number[]): number {
  const sorted = [...latencies].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0
}

beforeEach(() => jest.useFakeTimers({ now: 1_800_000_000_000 }))
afterEach(() => jest.useRealTimers())

test('under three times its capacity, the limit settles near the capacity: admitted latency stays low, goodput high', async () => {
  const gate = new AdaptiveGate(config())
  const capacity = 16
  const perSecond = (capacity * 1000) / SERVICE_MS
  const start = Date.now()
  const outcomes = await simulate(gate, 10, 3 * perSecond, () => capacity)
  const late = outcomes.filter((o) => o.at - start >= 5000 && o.at - start < 10_000)
  const served = late.filter((o) => o.latencyMs !== undefined)
  expect(p99(served.map((o) => o.latencyMs!))).toBeLessThanOrEqual(2 * UNLOADED_P99_MS)
  expect(served.length / 5).toBeGreaterThanOrEqual(0.9 * perSecond)
  expect(gate.limit).toBeGreaterThanOrEqual(capacity * 0.75)
  expect(gate.limit).toBeLessThanOrEqual(capacity * 2)
})

test('sheddable traffic is refused first; critical traffic is served', async () => {
  const gate = new AdaptiveGate(config())
  const capacity = 16
  const perSecond = (capacity * 1000) / SERVICE_MS
  const start = Date.now()
  const outcomes = (await simulate(gate, 10, 3 * perSecond, () => capacity)).filter((o) => o.at - start >= 2000)
  const critical = outcomes.filter((o) => o.priority === 'critical')
  expect(critical.filter((o) => o.latencyMs !== undefined).length / critical.length).toBeGreaterThanOrEqual(0.99)
  const sheddable = outcomes.filter((o) => o.priority === 'sheddable')
  // Three times the capacity with 30% sheddable: every sheddable request is refused, and normal ones too.
  expect(sheddable.filter((o) => o.shed !== undefined).length / sheddable.length).toBeGreaterThanOrEqual(0.95)
  expect(gate.shed.critical).toBeLessThanOrEqual(gate.shed.sheddable / 100)
})

test('after the capacity halves, the limit follows it down and latency is back within bounds in 5 s', async () => {
  const gate = new AdaptiveGate(config())
  const capacity = 16
  const perSecond = (capacity * 1000) / SERVICE_MS
  const start = Date.now()
  const outcomes = await simulate(gate, 20, 3 * perSecond, (t) => (t < 10 ? capacity : capacity / 2))
  const late = outcomes.filter((o) => o.at - start >= 15_000 && o.latencyMs !== undefined)
  expect(p99(late.map((o) => o.latencyMs!))).toBeLessThanOrEqual(2 * UNLOADED_P99_MS)
  expect(late.length / 5).toBeGreaterThanOrEqual(0.9 * (perSecond / 2))
  expect(gate.limit).toBeLessThanOrEqual(capacity)
})

test('at half its capacity nothing is refused, and the limit is never probed (the traffic, not the limit, is the bound)', async () => {
  const gate = new AdaptiveGate(config())
  const capacity = 16
  const perSecond = (capacity * 1000) / SERVICE_MS
  const limits: number[] = []
  const watch = setInterval(() => limits.push(gate.limit), 10)
  const outcomes = await simulate(gate, 20, perSecond / 2, () => capacity)
  clearInterval(watch)
  expect(outcomes.filter((o) => o.shed !== undefined)).toEqual([])
  expect(Math.min(...limits)).toBeGreaterThanOrEqual(20)
})

test.each(['aimd', 'vegas'] as const)('%s also keeps admitted latency within twice the unloaded latency', async (algorithm) => {
  const gate = new AdaptiveGate(config({ algorithm }))
  const capacity = 16
  const perSecond = (capacity * 1000) / SERVICE_MS
  const start = Date.now()
  const outcomes = await simulate(gate, 10, 3 * perSecond, () => capacity)
  const served = outcomes.filter((o) => o.at - start >= 5000 && o.latencyMs !== undefined)
  expect(p99(served.map((o) => o.latencyMs!))).toBeLessThanOrEqual(2 * UNLOADED_P99_MS)
  expect(served.length / 5).toBeGreaterThanOrEqual(0.8 * perSecond)
})

describe('the order of shedding, on a fixed limit of 2', () => {
  const fixed = (overrides: Partial<AdaptiveGateConfig> = {}) =>
    new AdaptiveGate(config({ initialLimit: 2, minLimit: 2, maxLimit: 2, queueTimeoutMs: 50, maxQueue: 1, ...overrides }))

  test('once a normal request is refused, the waiting sheddable one is refused with it, and new ones for an interval', async () => {
    const gate = fixed({ maxQueue: 2 })
    gate.acquire('normal')
    gate.acquire('normal')
    const normal = gate.acquire('normal')
    const sheddable = gate.acquire('sheddable')
    await jest.advanceTimersByTimeAsync(50)
    expect(await normal).toMatchObject({ reason: 'timeout' })
    expect(await sheddable).toMatchObject({ reason: 'shedding' })
    expect(gate.acquire('sheddable')).toMatchObject({ reason: 'shedding' })
    await jest.advanceTimersByTimeAsync(99)
    expect(gate.acquire('sheddable')).toMatchObject({ reason: 'shedding' })
    await jest.advanceTimersByTimeAsync(1)
    expect(gate.acquire('sheddable')).toBeInstanceOf(Promise)
    expect(gate.shed).toEqual({ critical: 0, normal: 1, sheddable: 3 })
  })

  test("a critical request whose wait is up takes a lower class's next slot, past the limit, while lower classes hold slots", async () => {
    const gate = fixed({ maxQueue: 3 })
    const normals = [gate.acquire('normal'), gate.acquire('normal')] as Permit[]
    const critical = [gate.acquire('critical'), gate.acquire('critical')]
    await jest.advanceTimersByTimeAsync(50)
    // Two normal requests hold slots: the two critical ones go past the limit in their place.
    expect((await Promise.all(critical)).every((a) => a instanceof Permit)).toBe(true)
    expect(gate.inflight).toBe(4)
    // The normal requests' slots do not free for their class until the limit is no longer passed.
    const next = gate.acquire('normal')
    normals[0]!.release()
    normals[1]!.release()
    expect(gate.inflight).toBe(2)
    // No lower class holds a slot now: a request whose wait is up is refused, whatever its class.
    const last = gate.acquire('critical')
    await jest.advanceTimersByTimeAsync(50)
    expect(await next).toMatchObject({ reason: 'timeout' })
    expect(await last).toMatchObject({ reason: 'timeout' })
  })

  test('within a class, a burst is served oldest first', async () => {
    const gate = fixed({ maxQueue: 3 })
    const held = [gate.acquire('normal'), gate.acquire('normal')] as Permit[]
    const order: number[] = []
    for (const n of [1, 2, 3]) void (gate.acquire('critical') as Promise<Permit | Shed>).then(() => order.push(n))
    held[0]!.release()
    held[1]!.release()
    await jest.advanceTimersByTimeAsync(0)
    expect(order).toEqual([1, 2])
  })
})
