import type { Decision } from '@tollgate/core'
import { admittedAcrossEdge, algorithmSuite, type Row, replay } from '../support/decision-table'

// The sliding-window counter (Cloudflare's estimate): the previous window's count weighted by how much
// of it the sliding window still covers, plus the current count, stays ≤ max. Every request is one
// atomic script, so a refused request counts nothing (see packages/core/src/algorithms/sliding-window.ts).

const W = 10_000
/** The start of a window a little ahead of now: every table starts on an edge it knows. */
const windowStart = () => (Math.floor(Date.now() / W) + 2) * W

const suite = algorithmSuite('sliding-window', { max: 4, window: W })

suite.each((limiter, makeStore) => {
  it('admits max, then one request each time a quarter of the full previous window has slid out', async () => {
    const { limiter: l, clock } = limiter()
    // [ms after the window start, cost, allowed, remaining, retryAfterMs, resetAt − window start]
    const rows: Row[] = [
      [1000, 1, true, 3, 0, W],
      [1000, 1, true, 2, 0, W],
      [1000, 1, true, 1, 0, W],
      [1000, 1, true, 0, 0, W], // the last request that fits
      // The first refused: in the next window the 4 weigh 4 × (W − e) / W, and 1 more fits once e = W / 4.
      [1000, 1, false, 0, 11_500, 12_500],
      [W + 2499, 1, false, 0, 1, 2 * W], // 4 × 7501 / 10000 + 1 > 4, by 1 ms
      [W + 2500, 1, true, 0, 0, 2 * W],
      [W + 5000, 1, true, 0, 0, 2 * W], // 4 × 0.5 + 2 = 4
      [W + 5000, 1, false, 0, 2500, 2 * W],
      [W + 7500, 1, true, 0, 0, 2 * W], // 4 × 0.25 + 3 = 4
      [2 * W, 1, true, 0, 0, 3 * W], // the edge: the 3 of the last window weigh fully, 3 + 1 = 4
    ]
    expect(await replay(l, clock, 'c', windowStart(), rows)).toEqual(rows)
  })

  it('counts a request of cost n as n, and a refused one not at all', async () => {
    const { limiter: l, clock } = limiter()
    const rows: Row[] = [
      [1000, 3, true, 1, 0, W],
      // 3 + 2 > 4: in the next window 3 × (W − e) / W + 2 ≤ 4 once e ≥ W / 3, rounded up to 3334 ms.
      [1000, 2, false, 0, 12_334, 13_334],
      [1000, 1, true, 0, 0, W], // the refused request used nothing
    ]
    expect(await replay(l, clock, 'c', windowStart(), rows)).toEqual(rows)
  })

  it('refuses a request costing more than max, Retry-After covering both windows, and counts none of it', async () => {
    const { limiter: l, clock } = limiter()
    const rows: Row[] = [
      [1000, 5, false, 0, 19_000, 2 * W],
      [1000, 4, true, 0, 0, W],
    ]
    expect(await replay(l, clock, 'c', windowStart(), rows)).toEqual(rows)
  })

  it('gives the room of a refunded request back within its window', async () => {
    const { limiter: l, clock } = limiter({ skipFailedRequests: true })
    const start = windowStart()
    clock.now = start + 1000
    const first = (await l.consume('c')) as Decision
    for (let i = 0; i < 3; i++) await l.consume('c')
    expect((await l.consume('c')).allowed).toBe(false)
    await l.refund(first)
    const again = await l.consume('c')
    expect([again.allowed, again.remaining, again.resetAt - start]).toEqual([true, 0, W])
    expect((await l.consume('c')).allowed).toBe(false)
  })

  describe('across a window edge (10 per second, 10 requests just before and 10 just after)', () => {
    // The sliding-window counter keeps to max per rolling second: the previous second's 10 still weigh
    // almost fully 1 ms after the edge.
    it('admits 10', async () => {
      expect(await admittedAcrossEdge('sliding-window', makeStore())).toBe(10)
    })
  })
})
