import assert from 'node:assert/strict'
import type { AlgorithmName, LimitSpec, Store, StoreCall } from '../types'
import {
  type ContractRedis,
  type ContractRunner,
  type ContractStore,
  HOUR,
  keysUnder,
  keysWithoutTtl,
  MINUTE,
  SECOND,
} from './contract-support'
import { countOf, limitSpec, resetCount, storeCall } from './store-calls'

/* The contract of a Store's optional members: the fixed window's `increment` fast path, the `blockDuration` blocks and `settle`. */

/** The block members: a block holds until its end (with a TTL to match), and `unblock` ends it, and only it. */
export function blockContract(it: ContractRunner['it'], make: () => ContractStore, redis?: () => ContractRedis) {
  it("keeps a block until unblock ends it, and leaves other clients' blocks alone", async () => {
    const { store, prefix } = make()
    assert.deepEqual([typeof store.blockedUntil, typeof store.block, typeof store.unblock], ['function', 'function', 'function'])
    const now = Date.now()
    const [a, b] = [`${prefix}{a}:block`, `${prefix}{b}:block`]
    assert.equal(await store.blockedUntil!(a, now), 0)
    await store.block!(a, now + MINUTE, now)
    await store.block!(b, now + MINUTE, now)
    assert.equal(await store.blockedUntil!(a, now + 30 * SECOND), now + MINUTE)
    if (redis !== undefined) assert.deepEqual(await keysWithoutTtl(redis(), prefix), [])
    await store.unblock!(a)
    assert.equal(await store.blockedUntil!(a, now), 0)
    assert.equal(await store.blockedUntil!(b, now), now + MINUTE)
    await store.unblock!(a) // ending no block is no error
  })
}

/** The optional fast path of the single-limit fixed window (`increment`), and its agreement with `admit`. */
export function incrementContract({ describe, it }: ContractRunner, make: () => ContractStore) {
  const W = 60_000
  const t0 = Math.floor(Date.now() / W) * W + 1000 // 1 s into the current minute

  describe('increment', () => {
    it('returns the count after each increment, starting at the cost', async () => {
      const { store, prefix } = make()
      const key = `${prefix}{a}`
      assert.equal(await store.increment!(key, 1, W, t0), 1)
      assert.equal(await store.increment!(key, 1, W, t0 + 10), 2)
      assert.equal(await store.increment!(key, 5, W, t0 + 20), 7)
    })

    it('counts each key on its own', async () => {
      const { store, prefix } = make()
      assert.equal(await store.increment!(`${prefix}{a}`, 1, W, t0), 1)
      assert.equal(await store.increment!(`${prefix}{b}`, 1, W, t0), 1)
    })

    it('starts again at the next window, aligned to the clock', async () => {
      const { store, prefix } = make()
      const key = `${prefix}{edge}`
      await store.increment!(key, 3, W, t0 + W - 1001) // last ms of the window
      assert.equal(await store.increment!(key, 1, W, t0 + W - 1001), 4)
      assert.equal(await store.increment!(key, 1, W, t0 + W - 1000), 1) // first ms of the next
    })

    it('reads a count without changing it, and resets it', async () => {
      const { store, prefix } = make()
      const key = `${prefix}{peek}`
      assert.equal(await countOf(store, key, W, t0), 0)
      await store.increment!(key, 2, W, t0)
      assert.equal(await countOf(store, key, W, t0), 2)
      assert.equal(await countOf(store, key, W, t0), 2)
      await resetCount(store, key, W, t0)
      assert.equal(await countOf(store, key, W, t0), 0)
      assert.equal(await store.increment!(key, 1, W, t0), 1)
    })

    it('gives each of many concurrent increments of one key its own exact position', async () => {
      const { store, prefix } = make()
      const key = `${prefix}{hot}`
      const costs = Array.from({ length: 200 }, (_, i) => 1 + (i % 3))
      const counts = await Promise.all(costs.map((cost) => store.increment!(key, cost, W, t0)))
      // Each count is the running total at that request: distinct, and the last is the sum.
      const total = costs.reduce((a, b) => a + b, 0)
      assert.equal(Math.max(...counts), total)
      assert.equal(new Set(counts).size, costs.length)
      let running = 0
      const expected = costs.map((c) => (running += c))
      assert.deepEqual(
        [...counts].sort((a, b) => a - b),
        expected.sort((a, b) => a - b),
      )
    })

    it('keeps many keys apart under concurrency', async () => {
      const { store, prefix } = make()
      const calls: Array<Promise<number>> = []
      for (let round = 0; round < 5; round++)
        for (let k = 0; k < 100; k++) calls.push(Promise.resolve(store.increment!(`${prefix}{k${k}}`, 1, W, t0)))
      const counts = await Promise.all(calls)
      for (let k = 0; k < 100; k++) {
        assert.deepEqual([0, 1, 2, 3, 4].map((round) => counts[round * 100 + k]).sort(), [1, 2, 3, 4, 5], `key k${k}`)
      }
    })
  })
}

/**
 * The optional `settle`, for one algorithm: an admitted call's count moves from its estimate to its
 * actual cost in the call's own windows, down never below zero, up even past the limit, and not at all
 * once the call's window has ended. `settle` undefined: the cases run when the store has `settle()`.
 */
export function settleContract(
  it: ContractRunner['it'],
  algorithm: AlgorithmName,
  make: () => ContractStore,
  settle: boolean | undefined,
  redis?: () => ContractRedis,
) {
  const five = limitSpec(5, MINUTE, 5, '1m')
  const short = limitSpec(3, 10 * SECOND, 3, '10s')
  const long = limitSpec(5, HOUR, 5, '1h')
  const call = (storeKey: string, limits: LimitSpec[], cost: number, now: number) => storeCall(algorithm, storeKey, limits, cost, now)
  /** A fresh store with `settle`, or undefined when it has none and none was promised. */
  const made = (): ContractStore | undefined => {
    const m = make()
    if (settle === undefined && typeof m.store.settle !== 'function') return undefined
    assert.equal(typeof m.store.settle, 'function', 'the store has settle()')
    return m
  }
  /** Admits calls of cost 1 one after another until one is refused: the number admitted. */
  async function room(store: Store, storeKey: string, limits: LimitSpec[], now: number): Promise<number> {
    for (let n = 0; n < 100; n++) if (!(await store.admit(call(storeKey, limits, 1, now))).allowed) return n
    throw new assert.AssertionError({ message: '100 calls admitted in a row' })
  }
  const admitted = async (store: Store, c: StoreCall) => assert.equal((await store.admit(c)).allowed, true, 'the call is admitted')

  it('settles an admitted call down to its actual cost, giving the difference back in every limit', async () => {
    const m = made()
    if (m === undefined) return
    const { store, prefix } = m
    const t = nextStart(HOUR) + SECOND
    const c = call(`${prefix}{c}`, [short, long], 3, t)
    await admitted(store, c)
    await store.settle!(c, 1, t)
    assert.equal(await room(store, `${prefix}{c}`, [short, long], t), 2)
    // The hour kept 1 + 2: 2 left once the 10 s limit is empty again (none, had the settle missed it).
    assert.equal(await room(store, `${prefix}{c}`, [short, long], t + 20 * SECOND), 2)
    await store.settle!(call(`${prefix}{z}`, [five], 3, t), 0, t) // a client with no count stays at zero
    assert.equal(await room(store, `${prefix}{z}`, [five], t), 5)
  })

  it('settles an admitted call up past the limit: later calls of its window are refused', async () => {
    const m = made()
    if (m === undefined) return
    const { store, prefix } = m
    const t = nextStart(MINUTE) + SECOND
    const c = call(`${prefix}{c}`, [five], 2, t)
    await admitted(store, c)
    await store.settle!(c, 9, t + SECOND)
    assert.equal(await room(store, `${prefix}{c}`, [five], t + SECOND), 0)
    const d = call(`${prefix}{d}`, [five], 1, t)
    await admitted(store, d)
    await store.settle!(d, 4, t)
    assert.equal(await room(store, `${prefix}{d}`, [five], t), 1)
  })

  it("changes nothing once the call's window has ended", async () => {
    const m = made()
    if (m === undefined) return
    const { store, prefix } = m
    const lim = limitSpec(5, 10 * SECOND, 5, '10s')
    const t = nextStart(10 * SECOND) + 9 * SECOND
    const later = t + 10 * SECOND // past the window of the call (and, for GCRA and the log, a window length after it)
    const calls: Record<string, StoreCall> = {}
    for (const c of ['down', 'up', 'control']) {
      calls[c] = call(`${prefix}{${c}}`, [lim], 3, t)
      await admitted(store, calls[c]!)
    }
    await store.settle!(calls.down!, 0, later)
    await store.settle!(calls.up!, 5, later)
    const read = async (c: string, now: number) => [...(await store.admit(call(`${prefix}{${c}}`, [lim], 0, now))).values]
    for (const now of [t, t + SECOND, later]) {
      const control = await read('control', now)
      assert.deepEqual([await read('down', now), await read('up', now)], [control, control], `read at call time + ${now - t} ms`)
    }
  })

  // The previous window weighs in a sliding window's next one, which must then read it as it was.
  if (algorithm === 'sliding-window') {
    it('changes nothing once a later window of the client has a count, whatever the time the settle carries', async () => {
      const m = made()
      if (m === undefined) return
      const { store, prefix } = m
      const lim = limitSpec(5, 10 * SECOND, 5, '10s')
      const t = nextStart(10 * SECOND) + 9 * SECOND
      const next = t + 2 * SECOND // in the next window
      for (const c of ['moved', 'control']) {
        const first = call(`${prefix}{${c}}`, [lim], 4, t)
        await admitted(store, first)
        await admitted(store, call(`${prefix}{${c}}`, [lim], 1, next)) // another clock has opened the next window
        if (c === 'moved') await store.settle!(first, 0, t + 1) // its own clock is still in the call's window
      }
      assert.deepEqual(
        await room(store, `${prefix}{moved}`, [lim], next),
        await room(store, `${prefix}{control}`, [lim], next),
        "the next window reads the call's window as it was",
      )
    })
  }

  if (redis !== undefined) {
    it('gives every key a settle writes a TTL', async () => {
      const m = made()
      if (m === undefined) return
      const { store, prefix } = m
      const t = nextStart(HOUR) + SECOND
      const up = call(`${prefix}{up}`, [short, long], 1, t)
      await admitted(store, up)
      await store.settle!(up, 9, t)
      await store.settle!(call(`${prefix}{none}`, [short, long], 1, t), 4, t) // settled up with nothing counted before
      const down = call(`${prefix}{down}`, [five], 3, t)
      await admitted(store, down)
      await store.settle!(down, 0, t)
      const written = await keysUnder(redis(), prefix)
      assert.ok(written.length >= 3, `at least 3 keys written under ${prefix}, found ${written.length}`)
      assert.deepEqual(await keysWithoutTtl(redis(), prefix), [])
    })
  }
}

/** The start of the next window of `ms`. */
function nextStart(ms: number): number {
  return (Math.floor(Date.now() / ms) + 1) * ms
}
