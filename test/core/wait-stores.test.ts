import { type Decision, Limiter, MemoryStore, RedisStore, type Store } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// limiter.wait in real time on each store: the sleeping itself is what these tests look at. Whether a
// decision came early is judged against the limiter's windows (the decisions' own times), never
// against a timing tolerance.

const db = useRedis({ nodeRedis: true })

const stores: Array<[string, () => Store]> = [
  ['the memory store', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis through ioredis', () => new RedisStore({ client: db.client, timeout: '2s' })],
  ['Redis through node-redis', () => new RedisStore({ client: db.nodeRedis, timeout: '2s' })],
]

/** A clock that reads `phase` ms into a 1 s window now, and runs on in real time. */
function clockAt(phase: number): () => number {
  const offset = (Date.now() % 1000) - phase
  return () => Date.now() - offset
}

/** Starts `n` waits on one key; each result carries the index of its wait and its place among the settled. */
function waitAll(limiter: Limiter, n: number, maxWaitMs: number): Promise<Array<{ d: Decision; settledAs: number }>> {
  let settled = 0
  return Promise.all(Array.from({ length: n }, () => limiter.wait('upstream', { maxWaitMs }).then((d) => ({ d, settledAs: settled++ }))))
}

describe.each(stores)('limiter.wait on %s', (_name, makeStore) => {
  it('resolves 20 waiters on a 5-per-second key, all admitted, in arrival order, each in a window with room, within 4 s', async () => {
    const limiter = new Limiter({ max: 5, window: '1s', store: makeStore(), prefix: testPrefix('wait') })
    const tries: Decision[] = []
    limiter.on('decision', (d: Decision) => tries.push(d))
    const start = Date.now()
    const results = await waitAll(limiter, 20, 10_000)

    expect(results.map((r) => r.settledAs)).toEqual(Array.from({ length: 20 }, (_, i) => i))
    const decisions = results.map((r) => r.d)
    expect(decisions.every((d) => d.allowed && d.source === 'store')).toBe(true)
    // None early: the windows of the admissions follow arrival order, and no window admitted more than 5.
    const windows = decisions.map((d) => Math.floor(d.at / 1000))
    expect(windows).toEqual([...windows].sort((a, b) => a - b))
    const perWindow = new Map<number, number>()
    for (const w of windows) perWindow.set(w, (perWindow.get(w) ?? 0) + 1)
    expect(Math.max(...perWindow.values())).toBeLessThanOrEqual(5)
    expect(decisions.every((d) => d.count <= 5)).toBe(true) // the store's own count of each window
    // Within 4 s: 4 windows at most, the first the one the waits started in.
    expect(windows[0]).toBe(Math.floor(start / 1000))
    expect(windows[19]! - windows[0]!).toBeLessThanOrEqual(3)
    // No polling: one refused try (the head's) before each later window, and none before its retry time.
    expect(tries.filter((d) => !d.allowed)).toHaveLength(windows[19]! - windows[0]!)
    tries.forEach((d, i) => {
      if (!d.allowed) expect(tries[i + 1]!.at).toBeGreaterThanOrEqual(d.at + d.retryAfterMs)
    })
  })

  it('with maxWaitMs 300, admits the 5 the window has room for and resolves the 15 late ones refused at their deadline, in order', async () => {
    const clock = clockAt(0)
    const limiter = new Limiter({ max: 5, window: '1s', store: makeStore(), prefix: testPrefix('wait-late'), clock })
    const start = clock()
    const results = await waitAll(limiter, 20, 300)

    expect(results.map((r) => r.settledAs)).toEqual(Array.from({ length: 20 }, (_, i) => i))
    const decisions = results.map((r) => r.d)
    expect(decisions.map((d) => d.allowed)).toEqual(Array.from({ length: 20 }, (_, i) => i < 5))
    for (const d of decisions.slice(5)) {
      expect(d.at).toBeGreaterThanOrEqual(start + 300)
      expect(d.at + d.retryAfterMs).toBe(Math.ceil((start + 1) / 1000) * 1000) // the window's end, where a try could pass
    }
  })

  it("with maxWaitMs 300 starting 800 ms into a window, also admits the next window's 5 and refuses the other 10", async () => {
    const clock = clockAt(800)
    const limiter = new Limiter({ max: 5, window: '1s', store: makeStore(), prefix: testPrefix('wait-edge'), clock })
    const results = await waitAll(limiter, 20, 300)

    const decisions = results.map((r) => r.d)
    expect(decisions.map((d) => d.allowed)).toEqual(Array.from({ length: 20 }, (_, i) => i < 10))
    const windows = decisions.slice(0, 10).map((d) => Math.floor(d.at / 1000))
    expect(windows[5]! - windows[0]!).toBe(1)
    expect(windows.slice(0, 5).every((w) => w === windows[0])).toBe(true)
    expect(windows.slice(5).every((w) => w === windows[5])).toBe(true)
  })

  it('resolves at once when the signal aborts, counting nothing for a wait that never tried', async () => {
    const limiter = new Limiter({ max: 5, window: '1m', store: makeStore(), prefix: testPrefix('wait-abort') })
    const early = await limiter.wait('upstream', { maxWaitMs: 60_000, signal: AbortSignal.abort() })
    expect(early.allowed).toBe(false)
    expect((await limiter.peek('upstream')).count).toBe(0)

    for (let i = 0; i < 5; i++) await limiter.consume('upstream')
    const controller = new AbortController()
    const head = limiter.wait('upstream', { maxWaitMs: 60_000, signal: controller.signal })
    const behind = limiter.wait('upstream', { maxWaitMs: 60_000, signal: controller.signal })
    setTimeout(() => controller.abort(), 100)
    // A minute's wait ends with the abort (the test's own timeout is 30 s).
    expect((await Promise.all([head, behind])).map((d) => d.allowed)).toEqual([false, false])
    expect((await limiter.peek('upstream')).count).toBe(5)
  })
})
