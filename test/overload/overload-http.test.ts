import { frameworks, offer, quantile, type Result, service, shedInOrder } from './rig'

// The overload benchmark (bench/overload.mjs), shorter, over real HTTP on each framework: a handler that serves
// CAPACITY requests at a time, first at half its capacity, then at three times its capacity, 20% critical, 50%
// normal and 30% sheddable. Every bound comes from what the same run measured. The unloaded latency is a twin of
// the service, with no limit in front of it, offered half its capacity in the same seconds: a machine busy with
// other work slows both alike, and a gate is not blamed for a stall of the machine's. A run in which the twin
// itself stalled (its p99 over STALL_MS) says nothing about the gate either way: it is run again, at most ATTEMPTS times.

const CAPACITY = 8
/** Each request's time in the service, on average: long enough that a busy machine's timer lateness is a small part of it. */
const SERVICE_MS = 40
/** The service's capacity on paper, requests a second. */
const NOMINAL = (CAPACITY * 1000) / SERVICE_MS
const HALF_MS = 2000
const OVERLOAD_MS = 5000
/** The gate's first moments at the overload are left out: the limit it had at half load takes time to come down. */
const SETTLE_MS = 1500
/** A p99 this far over the service's longest time (1.25 × SERVICE_MS) is the machine's stall, not the service's. */
const STALL_MS = 3 * SERVICE_MS
const ATTEMPTS = 3
/** The twin's limit: one it never reaches. */
const NO_LIMIT = { initialLimit: 1000, minLimit: 1000, maxLimit: 1000, eventLoopUtilization: false } as const

const ok = (r: Result) => r.status === 200
const p99 = (rs: Result[]) =>
  quantile(
    rs.filter(ok).map((r) => r.ms),
    0.99,
  )

/** One run: the gated server and its twin, their figures, and whether the acceptance held. */
async function run(name: keyof typeof frameworks) {
  const handler = service(CAPACITY, SERVICE_MS)
  const twin = service(CAPACITY, SERVICE_MS)
  const gated = await frameworks[name]({}, () => handler.serve())
  const plain = await frameworks[name](NO_LIMIT, () => twin.serve())
  let results: Result[]
  let unloaded: Result[]
  try {
    ;[results, unloaded] = await Promise.all([
      offer(gated.url, [
        { rate: NOMINAL / 2, ms: HALF_MS },
        { rate: 3 * NOMINAL, ms: OVERLOAD_MS },
      ]),
      offer(plain.url, [{ rate: NOMINAL / 2, ms: HALF_MS + OVERLOAD_MS }]),
    ])
  } finally {
    await Promise.all([gated.close(), plain.close()])
  }
  const from = HALF_MS + SETTLE_MS
  const to = HALF_MS + OVERLOAD_MS
  const during = (rs: Result[]) => rs.filter((r) => r.due >= from && r.due < to)
  const loaded = during(results)
  const admitted = loaded.filter(ok)
  // What the service could serve, from how long its requests held a slot: a timer's lateness is the machine's, not the gate's.
  const capacity = Math.min(NOMINAL, handler.perSecond())
  const critical = loaded.filter((r) => r.priority === 'critical')
  const figures = {
    unloadedP99: p99(during(unloaded)),
    p99: p99(loaded),
    goodput: admitted.filter((r) => r.ms <= 1000).length / ((to - from) / 1000),
    capacity,
    criticalServed: critical.filter(ok).length / critical.length,
    inOrder: shedInOrder(loaded),
    shed: gated.gate.shed,
    // Half the capacity is no overload: neither server refused anything then.
    refusedAtHalf: [...results.filter((r) => r.due < HALF_MS), ...unloaded].filter((r) => !ok(r)).length,
  }
  const held = {
    refusedAtHalf: figures.refusedAtHalf === 0,
    p99Within: figures.p99 <= 2 * figures.unloadedP99,
    goodput: figures.goodput >= 0.9 * capacity,
    criticalServed: figures.criticalServed >= 0.99,
    inOrder: figures.inOrder >= 0.95,
  }
  return { figures, held, stalled: figures.unloadedP99 > STALL_MS }
}

describe.each(Object.keys(frameworks) as Array<keyof typeof frameworks>)('%s', (name) => {
  test('at three times its capacity: admitted p99 within twice the unloaded one, 90% goodput, critical served, sheddable shed first', async () => {
    const runs: Array<Awaited<ReturnType<typeof run>>> = []
    for (let n = 0; n < ATTEMPTS; n++) {
      const last = await run(name)
      runs.push(last)
      if (!last.stalled || Object.values(last.held).every(Boolean)) break
    }
    const last = runs[runs.length - 1]!
    expect({ held: last.held, runs }).toMatchObject({
      held: { refusedAtHalf: true, p99Within: true, goodput: true, criticalServed: true, inOrder: true },
    })
  }, 90_000)
})
