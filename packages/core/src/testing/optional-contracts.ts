import assert from 'node:assert/strict'
import { type ContractRedis, type ContractRunner, type ContractStore, keysWithoutTtl, MINUTE, SECOND } from './contract-support'
import { countOf, resetCount } from './store-calls'

/* The contract of a Store's optional members: the fixed window's `increment` fast path and the `blockDuration` blocks. */

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
