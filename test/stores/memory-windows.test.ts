import { Limiter, MemoryStore } from '@tollgate/core'
import type { LimitSpec } from '@tollgate/core/store'

// The memory store's fixed windows keep each client's cell from one window to the next:
// a returning client's count starts again at 0 in the new window without a new entry, and the cells
// of clients that did not return are dropped by the sweep, or by a full map, never counted again.

const T0 = 1_800_000_000_000 // a window edge for 1 s windows
const quiet = { warn() {}, error() {} }

it('keeps a returning client’s cell and counts it from 0 in each new window', () => {
  const store = new MemoryStore({ sweepIntervalMs: 0 })
  const first = store.cell('a', 1000, T0)
  first.n += 3
  expect(store.countOf('a', 1000, T0 + 999)).toBe(3)
  // The next window reads 0 before the client counts again, and after it the same cell counts anew.
  expect(store.countOf('a', 1000, T0 + 1000)).toBe(0)
  expect(store.increment('a', 1, 1000, T0 + 1000)).toBe(1)
  expect(store.cell('a', 1000, T0 + 1500)).toBe(first)
  expect(first.n).toBe(1)
  // A window skipped entirely counts from 0 as well.
  expect(store.increment('a', 2, 1000, T0 + 3100)).toBe(2)
  store.shutdown()
})

it('drops the clients that did not return at the sweep, and counts only the current window in size', () => {
  const store = new MemoryStore({ sweepIntervalMs: 0 })
  for (const key of ['a', 'b', 'c']) store.increment(key, 1, 1000, T0)
  expect(store.size).toBe(3)
  store.increment('a', 1, 1000, T0 + 1000)
  expect(store.size).toBe(1) // b and c hold counts of an ended window
  store.prune(T0 + 1200)
  store.seedCount('b', 1000, T0 + 1300, 0) // held again, at 0
  expect(store.size).toBe(2)
  expect(store.countOf('c', 1000, T0 + 1300)).toBe(0)
  expect(store.countOf('a', 1000, T0 + 1300)).toBe(1)
  // Refunding into an ended window changes nothing, in the cell or the new window.
  store.refund({
    algorithm: 'fixed-window',
    storeKey: 'a',
    limits: [{ max: 5, windowMs: 1000 } as LimitSpec], // the store reads the window only
    cost: 1,
    now: T0 + 200,
    id: 'x',
  })
  expect(store.countOf('a', 1000, T0 + 1300)).toBe(1)
  store.shutdown()
})

it('gives a full map’s room to new clients once a window ends, keeping the clients that came back', () => {
  let now = T0
  const store = new MemoryStore({ sweepIntervalMs: 0, maxKeys: 10, logger: quiet })
  const limiter = new Limiter<string>({ max: 1, window: '1s', store, clock: () => now, key: (k) => k })
  const allowed = (key: string) => (limiter.check(key) as { allowed: boolean }).allowed
  for (let i = 0; i < 10; i++) expect(allowed(`a${i}`)).toBe(true)
  now += 1000
  for (let i = 0; i < 5; i++) expect(allowed(`a${i}`)).toBe(true) // back, counted from 0
  // The map is full of cells, half of an ended window: they make room, so each new client has its own count.
  expect(allowed('new')).toBe(true)
  expect(allowed('newer')).toBe(true)
  expect(allowed('new')).toBe(false)
  // The clients that came back kept their counts of this window.
  for (let i = 0; i < 5; i++) expect(allowed(`a${i}`)).toBe(false)
  expect(allowed('a7')).toBe(true)
  expect(store.size).toBe(8)
  store.shutdown()
})
