import type { LeaseModel } from './algorithm'
import { decide } from './decision'
import type { Slice } from './lease-slice'

/*
 * GCRA's lease (its script: leaseGcraScript in leases.ts): a grant moves the key's TAT on by the units
 * it carries, so its units stand for time and lapse once that time has passed; they are given back (the
 * TAT moves back) at the next grant. The process is a lessee while its marker may still exist, one
 * window after its last grant. Its decisions are GCRA's verdict on the TAT this process's view implies.
 */
export const gcraLease: LeaseModel = {
  offBook: false,
  turn() {},
  outlived: () => false,
  lapse(s, now) {
    if (s.left > 0 && now >= s.lapseAt) {
      s.back += s.left
      s.left = 0
    }
  },
  asksAhead: () => false,
  beforeGrant(s, now) {
    if (now >= s.markerUntil) s.granted = 0
  },
  adjust: (s) => s.back,
  adjusted(s, adjust) {
    s.back -= adjust
  },
  accepts: () => true,
  took(s, g, limit, now) {
    s.markerUntil = now + limit.windowMs
    s.lapseAt = now + Math.max(1, Math.ceil((g.granted * limit.windowMs) / limit.max))
  },
  emptyUntil: (_s, now, windowMs, g) => (g === undefined ? now + windowMs : now + Math.max(1, g.waitMs)),
  lessee: (s: Slice, now) => now < s.markerUntil,
  unspent: (s) => s.left + s.back,
  // The store's numbers of a GCRA decision are the TAT before and after, in ms (gcra.ts, verdict): the
  // TAT before is what leaves `remaining` units once `cost` more are taken.
  admitted(algorithm, limit, remaining, cost, now, key) {
    const units = Math.max(0, limit.burst - Math.min(limit.burst, remaining) - cost)
    return decide(algorithm, limit, now + tatOffset(limit, units), 0, true, cost, now, key, 'store')
  },
  // A TAT before that puts one more request `waitMs` from fitting.
  refused(algorithm, limit, cost, now, key, source, waitMs) {
    const units = limit.burst - cost
    const before = now + tatOffset(limit, units) + Math.max(1, Math.ceil(waitMs))
    return decide(algorithm, limit, before, before, false, cost, now, key, source)
  },
}

/** The ms of `units` emission intervals (W / max each). */
function tatOffset(limit: { max: number; windowMs: number }, units: number): number {
  return limit.max > 0 ? (units * limit.windowMs) / limit.max : 0
}
