import { Limiter, MemoryStore, type Store } from '@tollgate/core'
import type { StoreCall } from '@tollgate/core/store'

// Algorithm "concurrency" when the store fails: the fallback continues from the slots the store last
// reported (not from every slot it ever reported: slots free when requests end), and a request the
// fallback admitted is released in the fallback. The store is a MemoryStore presented as a remote one
// (local: false), so the limiter treats it as Redis (circuit, fallback, mirroring), as in resilience.test.ts.

class FlakyStore implements Store {
  readonly local = false
  readonly inner = new MemoryStore({ sweepIntervalMs: 0 })
  failing = false
  async admit(call: StoreCall) {
    if (this.failing) throw new Error('connect ECONNREFUSED 127.0.0.1:1')
    return this.inner.admit(call)
  }
  async refund(call: StoreCall) {
    if (this.failing) throw new Error('connect ECONNREFUSED 127.0.0.1:1')
    this.inner.refund(call)
  }
  async forget(call: StoreCall) {
    this.inner.forget(call)
  }
}

it('continues in the fallback from the slots the store last held, and releases the fallback’s own slots there', async () => {
  const store = new FlakyStore()
  const quiet = { warn: () => {}, error: () => {} }
  const limiter = new Limiter({ algorithm: 'concurrency', max: 3, window: '1m', store, logger: quiet, clock: () => 1_800_000_000_000 })
  limiter.on('storeError', () => {})
  const [, b, c] = [await limiter.consume('k'), await limiter.consume('k'), await limiter.consume('k')]
  await limiter.release(b!)
  await limiter.release(c!)
  const d = await limiter.consume('k') // the store holds 2 slots now (the first and d)
  expect([d.allowed, d.source, d.remaining]).toEqual([true, 'store', 1])

  store.failing = true
  const e = await limiter.consume('k')
  expect([e.allowed, e.source]).toEqual([true, 'fallback'])
  expect([(await limiter.consume('k')).allowed]).toEqual([false])
  await limiter.release(e)
  expect([(await limiter.consume('k')).allowed]).toEqual([true])
})
