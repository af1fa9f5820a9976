import type { Decision } from '@tollgate/core'
import { admittedAcrossEdge, algorithmSuite, type Row, replay } from '../support/decision-table'

// The fixed window: one counter per client and clock-aligned window, `count ≤ max`. A single limit
// takes the store's increment fast path, which counts refused requests too (see
// packages/core/src/algorithms/fixed-window.ts), so a client over the limit stays over it until the edge.

const W = 10_000
/** The start of a window a little ahead of now: every table starts on an edge it knows. */
const windowStart = () => (Math.floor(Date.now() / W) + 2) * W

const suite = algorithmSuite('fixed-window', { max: 3, window: W })

suite.each((limiter, makeStore) => {
  it('admits max per window, refuses until the edge with Retry-After to it, and starts again at the edge', async () => {
    const { limiter: l, clock } = limiter()
    // [ms into the window, cost, allowed, remaining, retryAfterMs, resetAt − window start]
    const rows: Row[] = [
      [2000, 1, true, 2, 0, W],
      [2000, 1, true, 1, 0, W],
      [5000, 1, true, 0, 0, W], // the last request that fits
      [5000, 1, false, 0, 5000, W], // the first refused: wait for the edge
      [W - 1, 1, false, 0, 1, W], // the window's last ms
      [W, 1, true, 2, 0, 2 * W], // the edge: a new count
      [W, 1, true, 1, 0, 2 * W],
    ]
    const start = windowStart()
    expect(await replay(l, clock, 'c', start, rows)).toEqual(rows)
  })

  it('counts a request of cost n as n, and counts a refused one too, so the rest of the window stays closed', async () => {
    const { limiter: l, clock } = limiter()
    const rows: Row[] = [
      [1000, 2, true, 1, 0, W],
      [1000, 2, false, 0, 9000, W], // 2 + 2 > 3, and the count is now 4
      [1000, 1, false, 0, 9000, W], // 1 unit was left, but the refused request used it
      [W, 3, true, 0, 0, 2 * W], // a new window, the whole max at once
    ]
    expect(await replay(l, clock, 'c', windowStart(), rows)).toEqual(rows)
  })

  it('refuses a request costing more than max until the window ends', async () => {
    const { limiter: l, clock } = limiter()
    const rows: Row[] = [
      [1000, 4, false, 0, 9000, W],
      [W, 3, true, 0, 0, 2 * W],
    ]
    expect(await replay(l, clock, 'c', windowStart(), rows)).toEqual(rows)
  })

  it('gives the room of a refunded request back within its window', async () => {
    const { limiter: l, clock } = limiter({ skipFailedRequests: true })
    const start = windowStart()
    clock.now = start + 1000
    const first = (await l.consume('c')) as Decision
    await l.consume('c')
    await l.consume('c')
    await l.refund(first)
    const again = await l.consume('c')
    expect([again.allowed, again.remaining, again.resetAt - start]).toEqual([true, 0, W])
    const refused = await l.consume('c')
    expect([refused.allowed, refused.retryAfterMs]).toEqual([false, 9000])
  })

  describe('across a window edge (10 per second, 10 requests just before and 10 just after)', () => {
    // The fixed window lets a client send 2 × max within 100 ms (the other algorithms keep to their
    // bounds: see their files).
    it('admits 20', async () => {
      expect(await admittedAcrossEdge('fixed-window', makeStore())).toBe(20)
    })
  })
})
