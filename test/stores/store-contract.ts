import type { Store } from '@tollgate/core'
import { countOf, resetCount } from '../support/store-calls'

/**
 * The behaviour every store must have, written once and run against each store (memory, Redis,
 * Redis Cluster). `make` returns a fresh store and a unique key prefix.
 */
export function storeContract(name: string, make: () => { store: Store; prefix: string }) {
  describe(`${name} store contract`, () => {
    const W = 60_000
    const t0 = Math.floor(Date.now() / W) * W + 1000 // 1 s into the current minute

    it('returns the count after each increment, starting at the cost', async () => {
      const { store, prefix } = make()
      const key = `${prefix}{a}`
      expect(await store.increment!(key, 1, W, t0)).toBe(1)
      expect(await store.increment!(key, 1, W, t0 + 10)).toBe(2)
      expect(await store.increment!(key, 5, W, t0 + 20)).toBe(7)
    })

    it('counts each key on its own', async () => {
      const { store, prefix } = make()
      expect(await store.increment!(`${prefix}{a}`, 1, W, t0)).toBe(1)
      expect(await store.increment!(`${prefix}{b}`, 1, W, t0)).toBe(1)
    })

    it('starts again at the next window, aligned to the clock', async () => {
      const { store, prefix } = make()
      const key = `${prefix}{edge}`
      await store.increment!(key, 3, W, t0 + W - 1001) // last ms of the window
      expect(await store.increment!(key, 1, W, t0 + W - 1001)).toBe(4)
      expect(await store.increment!(key, 1, W, t0 + W - 1000)).toBe(1) // first ms of the next
    })

    it('reads a count without changing it, and resets it', async () => {
      const { store, prefix } = make()
      const key = `${prefix}{peek}`
      expect(await countOf(store, key, W, t0)).toBe(0)
      await store.increment!(key, 2, W, t0)
      expect(await countOf(store, key, W, t0)).toBe(2)
      expect(await countOf(store, key, W, t0)).toBe(2)
      await resetCount(store, key, W, t0)
      expect(await countOf(store, key, W, t0)).toBe(0)
      expect(await store.increment!(key, 1, W, t0)).toBe(1)
    })

    it('gives each of many concurrent increments of one key its own exact position', async () => {
      const { store, prefix } = make()
      const key = `${prefix}{hot}`
      const costs = Array.from({ length: 200 }, (_, i) => 1 + (i % 3))
      const counts = await Promise.all(costs.map((cost) => store.increment!(key, cost, W, t0)))
      // Each count is the running total at that request: distinct, and the last is the sum.
      const total = costs.reduce((a, b) => a + b, 0)
      expect(Math.max(...counts)).toBe(total)
      expect(new Set(counts).size).toBe(costs.length)
      const sorted = [...counts].sort((a, b) => a - b)
      let running = 0
      const expected = costs.map((c) => (running += c))
      expect(sorted).toEqual(expected.sort((a, b) => a - b))
    })

    it('keeps many keys apart under concurrency', async () => {
      const { store, prefix } = make()
      const calls: Array<Promise<number>> = []
      for (let round = 0; round < 5; round++)
        for (let k = 0; k < 100; k++) calls.push(Promise.resolve(store.increment!(`${prefix}{k${k}}`, 1, W, t0)))
      const counts = await Promise.all(calls)
      for (let k = 0; k < 100; k++) {
        expect([0, 1, 2, 3, 4].map((round) => counts[round * 100 + k]).sort()).toEqual([1, 2, 3, 4, 5])
      }
    })
  })
}
