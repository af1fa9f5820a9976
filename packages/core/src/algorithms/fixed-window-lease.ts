import { windowIndex } from '../keys'
import type { LeaseModel } from './algorithm'
import { decide } from './decision'
import { aheadOf, turn } from './lease-slice'

/*
 * The fixed window's lease (its script: leaseFixedScript in leases.ts): a slice holds units of one
 * window, which lapse with it. Near a window's end the next window's slice is asked for ahead, so a busy
 * key starts the new window with units in hand. Units the fallback admits during an outage are counted
 * off the book and go into the window's count at the next grant.
 */
export const fixedWindowLease: LeaseModel = {
  offBook: true,
  turn: (s, now, limit) => turn(s, windowIndex(now, limit.windowMs), limit.max),
  // The units of one window never admit a request stamped with another.
  outlived: (s, now, later, windowMs) => windowIndex(now, windowMs) !== s.w || windowIndex(later, windowMs) !== s.w,
  lapse() {},
  asksAhead: (s, windowMs, now) => s.ahead === undefined && s.rate > 0 && (s.w + 1) * windowMs - now <= aheadOf(s, windowMs),
  beforeGrant() {},
  adjust: (s) => s.offBook,
  adjusted(s, adjust) {
    s.offBook -= adjust
  },
  accepts(s, request, g, windowMs) {
    const w = windowIndex(request.now, windowMs)
    if (w === s.w + 1) s.ahead = { w, granted: g.granted, remote: g.left, lessees: g.lessees }
    return w === s.w
  },
  took() {},
  emptyUntil: (s, _now, windowMs) => (s.w + 1) * windowMs,
  lessee: (s, now, windowMs) => s.granted > 0 && windowIndex(now, windowMs) === s.w,
  unspent: (s) => s.left,
  // The store's numbers of a fixed-window decision are the count before and after (fixed-window.ts).
  admitted(algorithm, limit, remaining, cost, now, key) {
    const count = Math.max(cost, limit.max - remaining)
    return decide(algorithm, limit, count - cost, count, true, cost, now, key, 'store')
  },
  refused: (algorithm, limit, cost, now, key, source) =>
    decide(algorithm, limit, limit.max, limit.max + cost, false, cost, now, key, source),
}
