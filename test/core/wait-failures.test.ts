import { type Decision, Limiter, type LimiterOptions, MemoryStore, type Store } from '@tollgate/core'
import type { StoreCall } from '@tollgate/core/store'

// limiter.wait when the store fails, holds a call, or throws: a MemoryStore presented as a remote one
// (local: false), so the limiter treats it as Redis (deadline, failure policy, fallback). Real
// redis-server processes are in wait-stores.test.ts; outages of a real server in test/faults.

const T0 = 1_800_000_000_000

/** A remote-looking store whose calls can fail, or wait until the test lets them through. */
class HeldStore implements Store {
  readonly local = false
  readonly inner = new MemoryStore({ sweepIntervalMs: 0 })
  failing = false
  /** While set, each count waits for `release()`. */
  private held: Array<() => void> | undefined
  hold(): void {
    this.held = []
  }
  release(): void {
    const held = this.held ?? []
    this.held = undefined
    for (const go of held) go()
  }
  get waiting(): number {
    return this.held?.length ?? 0
  }
  private async gate(): Promise<void> {
    if (this.held !== undefined) await new Promise<void>((go) => this.held!.push(go))
    if (this.failing) throw new Error('connect ECONNREFUSED 127.0.0.1:1')
  }
  async increment(key: string, cost: number, windowMs: number, now: number): Promise<number> {
    await this.gate()
    return this.inner.increment(key, cost, windowMs, now)
  }
  async admit(call: StoreCall) {
    await this.gate()
    return this.inner.admit(call)
  }
  async refund(call: StoreCall) {
    this.inner.refund(call)
  }
  async forget(call: StoreCall) {
    this.inner.forget(call)
  }
}

beforeEach(() => {
  jest.useFakeTimers({ now: T0, doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] })
})
afterEach(() => {
  jest.useRealTimers()
})

function limiterOn(store: Store, options: LimiterOptions<unknown> = {}) {
  const limiter = new Limiter({ max: 5, window: '1s', store, clock: () => Date.now(), logger: { warn() {}, error() {} }, ...options })
  const events = { limited: 0, storeError: 0 }
  limiter.on('limited', () => events.limited++)
  limiter.on('storeError', () => events.storeError++)
  return { limiter, events }
}

describe('limiter.wait when the store fails', () => {
  it('returns the "deny" policy\'s refusal at once, as consume does, to every waiter in line', async () => {
    const store = new HeldStore()
    store.failing = true
    const { limiter } = limiterOn(store, { onStoreError: 'deny' })
    const decisions: Decision[] = []
    for (let i = 0; i < 3; i++) limiter.wait('job', { maxWaitMs: 60_000 }).then((d) => decisions.push(d))
    await jest.advanceTimersByTimeAsync(0)
    expect(decisions.map((d) => `${d.allowed}:${d.source}`)).toEqual(['false:deny', 'false:deny', 'false:deny'])
    expect(jest.getTimerCount()).toBe(0)
  })

  it('returns the "allow" policy\'s admission', async () => {
    const store = new HeldStore()
    store.failing = true
    const { limiter } = limiterOn(store, { onStoreError: 'allow' })
    expect(await limiter.wait('job', { maxWaitMs: 60_000 })).toMatchObject({ allowed: true, source: 'allow' })
  })

  it("waits on the fallback's refusals as on the store's, and goes back to the store when it answers", async () => {
    const store = new HeldStore()
    const { limiter, events } = limiterOn(store) // onStoreError: 'fallback'
    const first = await Promise.all(Array.from({ length: 3 }, () => limiter.wait('job', { maxWaitMs: 5000 })))
    expect(first.map((d) => d.source)).toEqual(['store', 'store', 'store'])
    store.failing = true
    const decisions: Decision[] = []
    const all = Promise.all(Array.from({ length: 6 }, (_, i) => limiter.wait('job', { maxWaitMs: 5000 }).then((d) => (decisions[i] = d))))
    await jest.advanceTimersByTimeAsync(0)
    // The fallback continues the store's count of 3: two more in this window, then the queue waits.
    expect(decisions.filter(Boolean).map((d) => `${d.allowed}:${d.source}`)).toEqual(['true:fallback', 'true:fallback'])
    expect(events.storeError).toBeGreaterThan(0)
    store.failing = false
    await jest.advanceTimersByTimeAsync(1000)
    await all
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, true, true])
    expect(decisions.slice(2).map((d) => `${d.at - T0}:${d.source}`)).toEqual(['1000:store', '1000:store', '1000:store', '1000:store'])
  })
})

describe('limiter.wait while a try is at the store', () => {
  it('ends at once on abort, and gives back the admission that lands after it', async () => {
    const store = new HeldStore()
    const { limiter } = limiterOn(store)
    store.hold()
    const controller = new AbortController()
    const aborted = limiter.wait('job', { maxWaitMs: 60_000, signal: controller.signal })
    const behind = limiter.wait('job', { maxWaitMs: 60_000 })
    await jest.advanceTimersByTimeAsync(0)
    expect(store.waiting).toBe(1) // only the head tries
    controller.abort()
    expect(await aborted).toMatchObject({ allowed: false, count: 0 })
    store.release()
    const next = await behind
    expect(next).toMatchObject({ allowed: true, count: 1 }) // the aborted wait's unit was refunded before this try
    expect((await limiter.peek('job')).count).toBe(1)
  })

  it('keeps the refusal of an aborted try: the waiter behind it sleeps until the retry time instead of trying', async () => {
    const store = new HeldStore()
    const { limiter } = limiterOn(store)
    for (let i = 0; i < 5; i++) await limiter.consume('job')
    const tries: Decision[] = []
    limiter.on('decision', (d: Decision) => tries.push(d))
    store.hold()
    const controller = new AbortController()
    const aborted = limiter.wait('job', { maxWaitMs: 60_000, signal: controller.signal })
    const behind = limiter.wait('job', { maxWaitMs: 60_000 })
    await jest.advanceTimersByTimeAsync(0)
    controller.abort()
    await aborted
    store.release()
    await jest.advanceTimersByTimeAsync(1000)
    expect(await behind).toMatchObject({ allowed: true, at: T0 + 1000 })
    expect(tries.map((d) => `${d.at - T0}:${d.allowed}`)).toEqual(['0:false', '1000:true'])
  })

  it('does not hold the waiters behind a cost no limit admits', async () => {
    const store = new HeldStore()
    const { limiter } = limiterOn(store, { algorithm: 'sliding-window' }) // a refused try counts nothing here
    store.hold()
    const decisions: Decision[] = []
    limiter.wait('job', { maxWaitMs: 5000, cost: 6 }).then((d) => decisions.push(d))
    limiter.wait('job', { maxWaitMs: 5000 }).then((d) => decisions.push(d))
    await jest.advanceTimersByTimeAsync(0)
    store.release()
    await jest.advanceTimersByTimeAsync(0)
    expect(decisions.map((d) => `${d.cost}:${d.allowed}@${d.at - T0}`)).toEqual(['6:false@0', '1:true@0'])
  })

  it('lets a try that is at the store when the deadline passes end the wait with its answer', async () => {
    const store = new HeldStore()
    const { limiter } = limiterOn(store)
    store.hold()
    const wait = limiter.wait('job', { maxWaitMs: 0 })
    await jest.advanceTimersByTimeAsync(50)
    store.release()
    expect(await wait).toMatchObject({ allowed: true, source: 'store' })
  })

  it('rejects with the error of a store in this process that throws, and serves the waiters behind', async () => {
    const inner = new MemoryStore({ sweepIntervalMs: 0 })
    let throwing = true
    const store: Store = {
      local: true,
      admit: (call) => inner.admit(call),
      refund: (call) => inner.refund(call),
      forget: (call) => inner.forget(call),
      increment: (key, cost, windowMs, now) => {
        if (throwing) {
          throwing = false
          throw new Error('the store broke')
        }
        return inner.increment(key, cost, windowMs, now)
      },
    }
    const { limiter } = limiterOn(store)
    const broken = limiter.wait('job', { maxWaitMs: 1000 })
    const next = limiter.wait('job', { maxWaitMs: 1000 })
    await expect(broken).rejects.toThrow('the store broke')
    expect(await next).toMatchObject({ allowed: true })
  })
})
