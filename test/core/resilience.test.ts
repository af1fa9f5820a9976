import { type AlgorithmName, type Decision, Limiter, type LimitOptions, type Logger, MemoryStore, type Store } from '@tollgate/core'
import type { StoreCall } from '@tollgate/core/store'

// The failure policy, on a store that can be made to fail: a MemoryStore presented as a remote one
// (local: false), so the limiter treats it as Redis (circuit, fallback, mirroring). No Redis here:
// the same behaviours against real redis-server processes and a real Cluster are in test/faults and
// test/cluster.

class FlakyStore implements Store {
  readonly local = false
  readonly inner = new MemoryStore({ sweepIntervalMs: 0 })
  /** Nodes (the first character of the client key) that fail; all fail with '*'. */
  failing = new Set<string>()
  /** While set, calls wait here, unanswered, until the test fails them (a call whose deadline runs out later). */
  holding = false
  readonly held: Array<(error: Error) => void> = []
  constructor(
    fastPath: boolean,
    private readonly error = 'connect ECONNREFUSED 127.0.0.1:1',
  ) {
    if (!fastPath) this.increment = undefined
  }
  nodeOf(storeKey: string): string {
    return `node-${storeKey.slice(storeKey.indexOf('{') + 1)[0]}`
  }
  private check(storeKey: string): void {
    if (this.failing.has('*') || this.failing.has(this.nodeOf(storeKey))) throw new Error(this.error)
  }
  increment? = async (key: string, cost: number, windowMs: number, now: number): Promise<number> => {
    this.check(key)
    return this.inner.increment(key, cost, windowMs, now)
  }
  async admit(call: StoreCall) {
    if (this.holding) return new Promise<never>((_, reject) => void this.held.push(reject))
    this.check(call.storeKey)
    return this.inner.admit(call)
  }
  async refund(call: StoreCall) {
    this.inner.refund(call)
  }
  async forget(call: StoreCall) {
    this.inner.forget(call)
  }
}

function setup(store: Store, options: { algorithm?: AlgorithmName; limits?: LimitOptions[] } = {}) {
  const logs: string[] = []
  const logger: Logger = { warn: (m) => void logs.push(`warn: ${m}`), error: (m) => void logs.push(`error: ${m}`) }
  const now = 1_800_000_000_000 + 1000
  const limiter = new Limiter({ ...(options.limits ? {} : { max: 10, window: '1m' }), ...options, store, logger, clock: () => now })
  const events: string[] = []
  for (const e of ['storeError', 'recover', 'fallback']) limiter.on(e, () => events.push(e))
  return { limiter, logs, events }
}

/** A limiter of max 1000 per hour on `store`, with its log lines and a clock the test moves (`time.now`). */
function onMovingClock(store: Store) {
  const time = { now: 1_800_000_000_000 }
  const logs: string[] = []
  const logger: Logger = { warn: (m) => void logs.push(`warn: ${m}`), error: (m) => void logs.push(`error: ${m}`) }
  const limiter = new Limiter({ max: 1000, window: '1h', store, clock: () => time.now, logger })
  return { limiter, logs, time }
}

async function admitted(limiter: Limiter, key: string, n: number): Promise<Decision[]> {
  const out: Decision[] = []
  for (let i = 0; i < n; i++) out.push(await limiter.consume(key))
  return out
}

describe('a fallback that continues the count', () => {
  const cases: Array<[string, boolean, { algorithm?: AlgorithmName; limits?: LimitOptions[] }]> = [
    ['fixed window, fast path', true, {}],
    ['fixed window, script path', false, {}],
    [
      'fixed window, several limits',
      false,
      {
        limits: [
          { max: 10, window: '1m' },
          { max: 100, window: '1h' },
        ],
      },
    ],
    ['sliding window', false, { algorithm: 'sliding-window' }],
    ['gcra', false, { algorithm: 'gcra' }],
    ['sliding log', false, { algorithm: 'sliding-log' }],
  ]
  it.each(cases)('%s: a client at 8 of 10 when the store fails gets 2 more from the fallback, not 10', async (_name, fast, options) => {
    const store = new FlakyStore(fast)
    const { limiter } = setup(store, options)
    const before = await admitted(limiter, 'a', 8)
    expect(before.map((d) => [d.allowed, d.source])).toEqual(Array(8).fill([true, 'store']))
    store.failing.add('*')
    const during = await admitted(limiter, 'a', 5)
    expect(during.map((d) => d.source)).toEqual(Array(5).fill('fallback'))
    expect(during.map((d) => d.allowed)).toEqual([true, true, false, false, false])
  })

  it('continues the count of clients met before the limiter’s own mirror filled up and started over', async () => {
    // The fast path keeps each client's last count itself (limiter/fast-path/mirror-cells.ts, 32,768 clients at most)
    // and hands it to the fallback store when it fills up: 40,000 clients pass that bound.
    const store = new FlakyStore(true)
    const { limiter } = setup(store)
    expect((await admitted(limiter, 'early', 8)).every((d) => d.allowed && d.source === 'store')).toBe(true)
    for (let i = 0; i < 40_000; i++) await limiter.consume(`c${i}`)
    store.failing.add('*')
    const during = await admitted(limiter, 'early', 3)
    expect(during.map((d) => [d.source, d.allowed])).toEqual([
      ['fallback', true],
      ['fallback', true],
      ['fallback', false],
    ])
  })
})

describe('failures stay where they happen', () => {
  it('opens the circuit of the failed node only: clients on the other node keep store decisions', async () => {
    const store = new FlakyStore(true)
    const { limiter, logs, events } = setup(store)
    store.failing.add('node-a')
    const onA = await admitted(limiter, 'a1', 3)
    const onB = await admitted(limiter, 'b1', 3)
    expect(onA.map((d) => d.source)).toEqual(['fallback', 'fallback', 'fallback'])
    expect(onB.map((d) => d.source)).toEqual(['store', 'store', 'store'])
    expect(events.filter((e) => e === 'storeError')).toHaveLength(1) // the circuit spared the store the next two calls
    expect(logs).toEqual([expect.stringMatching(/^error: Tollgate: the store failed on node node-a \(connect ECONNREFUSED/)])
  })

  it('logs one error when a node goes down and one notice when it is back, however many requests meet it', async () => {
    const store = new FlakyStore(false)
    const { limiter, logs, time } = onMovingClock(store)
    store.failing.add('node-a')
    for (let i = 0; i < 50; i++) {
      await limiter.consume(`a${i}`)
      await limiter.consume(`b${i}`)
      time.now += 100 // past the circuit's retry time several times
    }
    store.failing.clear()
    time.now += 2000
    for (let i = 0; i < 10; i++) expect((await limiter.consume(`a${i}`)).source).toBe('store')
    expect(logs).toEqual([
      expect.stringMatching(/^error: Tollgate: the store failed on node node-a/),
      expect.stringMatching(/^warn: Tollgate: the store is answering again \(node node-a\)/),
    ])
  })

  it('opens no new outage for a call sent before the node answered again that fails after that answer', async () => {
    // Calls sent while a node comes back may run out of time after a later call got its answer: old
    // news, which must not log a second outage and a second recovery for one restart.
    const store = new FlakyStore(false)
    const { limiter, logs, time } = onMovingClock(store)
    const recoveries: unknown[] = []
    limiter.on('recover', (node) => void recoveries.push(node))
    store.failing.add('*')
    expect((await limiter.consume('a1')).source).toBe('fallback')
    store.failing.clear()
    time.now += 2000 // past the circuit's retry time
    store.holding = true
    const early = limiter.consume('a2') // sent before the node answers, answered after
    store.holding = false
    time.now += 10
    expect((await limiter.consume('a3')).source).toBe('store')
    time.now += 40
    store.held[0]!(new Error('Redis did not answer within 50 ms'))
    expect((await early).source).toBe('fallback') // its own request is still decided by the policy
    expect((await limiter.consume('a4')).source).toBe('store') // and the circuit stayed closed
    // A call sent after the answer that fails is a new outage.
    store.failing.add('*')
    expect((await limiter.consume('a5')).source).toBe('fallback')
    expect(logs).toEqual([
      expect.stringMatching(/^error: Tollgate: the store failed on node node-a/),
      expect.stringMatching(/^warn: Tollgate: the store is answering again \(node node-a\)/),
      expect.stringMatching(/^error: Tollgate: the store failed on node node-a/),
    ])
    expect(recoveries).toEqual(['node-a'])
  })

  it('decides an error that belongs to one key (WRONGTYPE) by the policy for that call only, with no outage logged', async () => {
    const store = new FlakyStore(true, 'WRONGTYPE Operation against a key holding the wrong kind of value')
    const { limiter, logs } = setup(store)
    store.failing.add('node-v')
    expect((await limiter.consume('victim')).source).toBe('fallback')
    expect((await limiter.consume('victim')).source).toBe('fallback')
    store.failing.clear()
    expect((await limiter.consume('victim')).source).toBe('store') // no circuit held it off the store
    expect(logs).toEqual([expect.stringMatching(/^warn: Tollgate: a store call failed for one client key \(WRONGTYPE/)])
  })
})
