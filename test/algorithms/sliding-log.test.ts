import type { Decision } from '@tollgate/core'
import { admittedAcrossEdge, algorithmSuite, type Row, replay } from '../support/decision-table'

// The sliding log: one entry per admitted unit, an exact rolling window; an entry leaves W after it
// was made, and Retry-After is when enough entries have left. A refused request counts nothing, and a
// refund removes exactly its own entries (see packages/core/src/algorithms/sliding-log.ts).

const W = 10_000
/** A time a little ahead of now; the log has no window edges, only its entries' times. */
const later = () => Math.floor(Date.now() / 1000) * 1000 + 60_000 + 123

const suite = algorithmSuite('sliding-log', { max: 3, window: W })

suite.each((limiter, makeStore) => {
  it('admits max per rolling window, then one more each time the oldest entry leaves', async () => {
    const { limiter: l, clock } = limiter()
    // [ms after the first request, cost, allowed, remaining, retryAfterMs, resetAt − first]; resetAt is
    // when the whole quota is back (the newest entry leaves) while units are left, else when the next
    // unit frees (the oldest entry leaves).
    const rows: Row[] = [
      [0, 1, true, 2, 0, W],
      [1000, 1, true, 1, 0, 1000 + W],
      [2000, 1, true, 0, 0, W], // the last request that fits: the next unit frees when the first entry leaves
      [3000, 1, false, 0, 7000, W], // the first refused: until the first entry leaves
      [W - 1, 1, false, 0, 1, W],
      [W, 1, true, 0, 0, W + 1000], // the first entry left; the second is now the oldest
      [W, 1, false, 0, 1000, W + 1000],
      [W + 1000, 1, true, 0, 0, W + 2000], // the second left too; the third (at 2000) is the oldest
    ]
    expect(await replay(l, clock, 'c', later(), rows)).toEqual(rows)
  })

  it('counts a request of cost n as n entries, and a refused one as none', async () => {
    const { limiter: l, clock } = limiter()
    const rows: Row[] = [
      [0, 2, true, 1, 0, W],
      [1000, 2, false, 0, 9000, W], // 2 + 2 > 3: one entry must leave, the oldest at W
      [1000, 1, true, 0, 0, W], // the refused request left no entry
      [W, 2, true, 0, 0, W + 1000], // both entries of the first request left at once
    ]
    expect(await replay(l, clock, 'c', later(), rows)).toEqual(rows)
  })

  it('refuses a request costing more than max, Retry-After one window, and counts none of it', async () => {
    const { limiter: l, clock } = limiter()
    const rows: Row[] = [
      [0, 4, false, 0, W, W],
      [0, 3, true, 0, 0, W],
    ]
    expect(await replay(l, clock, 'c', later(), rows)).toEqual(rows)
  })

  it("removes exactly the refunded request's entry, so the others keep their times", async () => {
    const { limiter: l, clock } = limiter({ skipFailedRequests: true })
    const start = later()
    const at = async (ms: number) => {
      clock.now = start + ms
      return (await l.consume('c')) as Decision
    }
    await at(0)
    const middle = await at(1000)
    await at(2000)
    expect((await at(3000)).allowed).toBe(false)
    await l.refund(middle)
    // Entries at 0 and 2000 are left: one more fits, and the log resets when the entry at 0 leaves
    // (at 1000 + W, had the refund taken the oldest entry instead).
    const again = await at(3000)
    expect([again.allowed, again.remaining, again.resetAt - start]).toEqual([true, 0, W])
    const next = await at(W)
    expect([next.allowed, next.remaining, next.resetAt - start]).toEqual([true, 0, W + 2000])
  })

  describe('across a window edge (10 per second, 10 requests just before and 10 just after)', () => {
    // The sliding log keeps to max per rolling second.
    it('admits 10', async () => {
      expect(await admittedAcrossEdge('sliding-log', makeStore())).toBe(10)
    })
  })
})
