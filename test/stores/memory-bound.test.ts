import { type AlgorithmName, Limiter, type Logger, MemoryStore } from '@tollgate/core'

// The memory store's bound (maxKeys): a flood of unique keys cannot grow the process without limit,
// cannot evict (and so reset) a client the store holds, and does not let new clients through
// unlimited: past the bound they share one count.

const algorithms: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log']

describe.each(algorithms)('MemoryStore bound, %s', (algorithm) => {
  it('holds at most maxKeys clients under a unique-key flood, keeps the held ones counting, and limits the rest together', () => {
    const warnings: string[] = []
    const logger: Logger = { warn: (m) => void warnings.push(m), error() {} }
    const store = new MemoryStore({ sweepIntervalMs: 0, maxKeys: 1000, logger })
    const now = 1_800_000_000_000
    const limiter = new Limiter<string>({ max: 3, window: '1m', algorithm, store, clock: () => now, key: (k) => k })
    const allowed = (key: string) => (limiter.check(key) as { allowed: boolean }).allowed

    // 500 clients the store holds, two requests each.
    for (let i = 0; i < 500; i++) expect([allowed(`held-${i}`), allowed(`held-${i}`)]).toEqual([true, true])
    // A flood of 20,000 unique keys, one request each.
    let floodAdmitted = 0
    for (let i = 0; i < 20_000; i++) if (allowed(`flood-${i}`)) floodAdmitted++
    // 500 of them fit under the bound (one request each), then the rest share one count of max 3.
    expect(floodAdmitted).toBe(500 + 3)
    expect(store.size).toBeLessThanOrEqual(1001)
    // The held clients were neither evicted nor reset: one more each, then refused.
    for (let i = 0; i < 500; i++) expect([allowed(`held-${i}`), allowed(`held-${i}`)]).toEqual([true, false])
    expect(warnings).toEqual([expect.stringMatching(/^Tollgate: the MemoryStore holds its maximum of 1000 clients \(maxKeys\)/)])
  })
})

it('frees the bound when the window ends: new clients get counts of their own again', () => {
  let now = 1_800_000_000_000
  const store = new MemoryStore({ sweepIntervalMs: 0, maxKeys: 10, logger: { warn() {}, error() {} } })
  const limiter = new Limiter<string>({ max: 1, window: '1s', store, clock: () => now, key: (k) => k })
  for (let i = 0; i < 10; i++) limiter.check(`a${i}`)
  expect((limiter.check('late') as { allowed: boolean }).allowed).toBe(true) // the overflow's first
  expect((limiter.check('later') as { allowed: boolean }).allowed).toBe(false) // shares it
  now += 1000
  expect((limiter.check('later') as { allowed: boolean }).allowed).toBe(true)
  expect((limiter.check('latest') as { allowed: boolean }).allowed).toBe(true)
})
