import type { Algorithm, LeaseModel } from '../../algorithms/algorithm'
import { isEmpty, newSlice, prefetchAt, REFUSAL_TRUST_MS, type Slice } from '../../algorithms/lease-slice'
import { unitsToAsk } from '../../algorithms/leases'
import { hex } from '../../hashes'
import { windowIndex } from '../../keys'
import type { LeaseConfig } from '../../options/lease-option'
import { unrefTimer } from '../../timers'
import type { Decision, DecisionSource, LeaseRequest, LimitSpec, MaybePromise, Store, StoreErrorPolicy } from '../../types'
import type { CallParts } from '../call-parts'
import type { Resilience } from '../failures'
import type { Telemetry } from '../reporting'

/** Keys a limiter keeps a slice for; past it, every slice is given back and the map starts over. */
const MAX_SLICES = 32_768

/**
 * Grants one request may wait for before it is refused (each is one round trip). A grant is at least
 * one unit while anything is left, and a share of it otherwise, so a burst that needs the whole quota
 * takes about log2(max) grants and then a few of one unit: this bound is never reached while Redis
 * still has units to grant.
 */
const MAX_GRANTS_PER_REQUEST = 64

/**
 * The per-key slices of the `lease` option (algorithms/leases.ts for the scripts and the grant math):
 * a request is decided from the process's slice with no round trip while it lasts; the next slice is
 * asked for before it runs out, and concurrent requests that find it empty wait on that one grant.
 * Unspent units go back when a key has been idle a while (a timer that does not hold the process
 * open) and at `close()`.
 *
 * When Redis fails, the process keeps deciding from what it holds. Past that: in a window where it
 * held a slice, the fallback refuses (the other processes may hold the rest of the window's quota);
 * in a window where it held none, the fallback admits at most max / lessees (as many processes as
 * leased the key when Redis last answered), and those units go into Redis's count at the next grant.
 */
export class Leases {
  private slices = new Map<string, Slice>()
  /**
   * This process's lessee id, in its marker keys: drawn at the first lease, not at construction, since
   * workerd refuses random values in a Worker's global scope, where an app builds its limiters.
   */
  private lessee: string | undefined
  private get owner(): string {
    this.lessee ??= hex(crypto.getRandomValues(new Uint8Array(6)))
    return this.lessee
  }
  private timer: ReturnType<typeof setInterval> | undefined
  private readonly idleMs: number

  constructor(
    private readonly lease: LeaseConfig,
    private readonly store: Store,
    /** Times the grants and give-backs (`tollgate.store.duration`, operations `lease` and `end_lease`). */
    private readonly telemetry: Telemetry,
    private readonly parts: CallParts,
    private readonly resilience: Resilience,
    private readonly windowMs: number,
    private readonly policy: StoreErrorPolicy,
    /** The limiter's algorithm, which leases. */
    private readonly algorithm: Algorithm,
    /** The model of its units and decisions under a lease (LEASE_MODELS). */
    private readonly model: LeaseModel,
    private readonly clock: () => number,
    /** The limiter's decision when the store cannot be asked (counting.ts, failed): the fallback, allow or deny. */
    private readonly failed: (clientKey: string, limit: LimitSpec, cost: number, now: number) => Decision,
    /** Reports a refusal (the `limited` event, shadow mode): counting.ts, finish. */
    private readonly finish: (decision: Decision) => Decision,
  ) {
    this.idleMs = Math.max(50, Math.min(windowMs / 4, 1000))
  }

  /** The decision for `cost` units of `clientKey` under `limit` (a single limit, under the client key). */
  count(clientKey: string, limit: LimitSpec, cost: number, now: number): MaybePromise<Decision> {
    const s = this.slice(clientKey, limit, now)
    s.limit = limit
    s.recent += cost
    s.lastUse = now
    const held = this.fromSlice(s, limit, cost, now)
    if (held !== undefined) return held
    if (now < s.spentUntil || isEmpty(s, now)) return this.refuse(s, limit, cost, now, 'cache')
    if (this.resilience.degraded && this.resilience.isOpen(s.stem, now)) return this.fallBack(s, limit, cost, now)
    return this.wait(s, limit, cost, now, 0)
  }

  /** Waits for the grant in flight (or asks for one), then decides again. */
  private async wait(s: Slice, limit: LimitSpec, cost: number, now: number, tries: number): Promise<Decision> {
    s.waiting += cost
    let ok: boolean
    try {
      ok = await this.grant(s, limit, cost, now)
    } finally {
      s.waiting -= cost
    }
    // The decision keeps its time: a grant is for the window the request arrived in. Once the window
    // is over (the clock, or another request, moved the slice on), the request is decided again, now,
    // in the new window: the units of one window never admit a request stamped with another.
    const later = this.clock()
    if (this.model.outlived(s, now, later, limit.windowMs)) return this.count(s.clientKey, limit, cost, later)
    const held = this.fromSlice(s, limit, cost, now)
    if (held !== undefined) return held
    if (!ok) return this.fallBack(s, limit, cost, now)
    if (now < s.spentUntil || isEmpty(s, now) || tries + 1 >= MAX_GRANTS_PER_REQUEST) return this.refuse(s, limit, cost, now, 'store')
    return this.wait(s, limit, cost, now, tries + 1)
  }

  /** The request decided from the slice, or undefined when it holds too little. Asks for the next slice early. */
  private fromSlice(s: Slice, limit: LimitSpec, cost: number, now: number): Decision | undefined {
    this.model.lapse(s, now)
    if (s.left < cost) return undefined
    s.left -= cost
    if (s.inflight === undefined && !(this.resilience.degraded && this.resilience.isOpen(s.stem, now))) {
      // Near the window's end the next window's slice is asked for instead: a slice of this one would lapse.
      if (this.model.asksAhead(s, limit.windowMs, now)) void this.grant(s, limit, 0, now, true)
      else if (s.left <= prefetchAt(s) && !isEmpty(s, now) && now >= s.spentUntil) void this.grant(s, limit, 0, now)
    }
    return this.model.admitted(this.algorithm, limit, s.left + s.remote, cost, now, s.clientKey)
  }

  private refuse(s: Slice, limit: LimitSpec, cost: number, now: number, source: DecisionSource): Decision {
    return this.finish(
      this.model.refused(this.algorithm, limit, cost, now, s.clientKey, source, Math.max(s.emptyUntil, s.spentUntil) - now),
    )
  }

  /**
   * The store could not be asked. In a window this process leased in, the other processes may hold
   * the rest of the quota: the fallback's count starts at max, so it refuses. Otherwise it starts at
   * max − max / lessees. Units it admits go to Redis's count at the next grant.
   */
  private fallBack(s: Slice, limit: LimitSpec, cost: number, now: number): Decision {
    if (this.policy === 'fallback' && this.model.offBook) {
      const w = windowIndex(now, limit.windowMs)
      if (s.seeded !== w) {
        s.seeded = w
        const budget = s.granted > 0 ? 0 : Math.floor(limit.max / Math.max(1, s.lessees))
        this.resilience.fallback.seedCount(this.parts.fastKey(s.clientKey, limit), limit.windowMs, now, limit.max - budget)
      }
    }
    const decision = this.failed(s.clientKey, limit, cost, now)
    if (decision.allowed && decision.source === 'fallback' && this.model.offBook) s.offBook += cost
    return decision
  }

  /**
   * One grant for the slice, shared by every request that waits; resolves false when the store failed.
   * `next` (fixed window): a grant for the window after the slice's, kept in `ahead` until it starts.
   */
  private grant(s: Slice, limit: LimitSpec, need: number, now: number, next = false): Promise<boolean> {
    if (s.inflight !== undefined)
      return s.inflight.then(
        () => true,
        () => false,
      )
    const elapsed = now - s.mark
    if (elapsed >= 20) {
      const rate = s.recent / elapsed
      s.rate = s.rate === 0 ? rate : (s.rate + rate) / 2
      s.recent = 0
      s.mark = now
    }
    this.model.beforeGrant(s, now)
    const request: LeaseRequest = {
      algorithm: this.algorithm.name as LeaseRequest['algorithm'],
      stem: s.stem,
      limit,
      // The next window's keys are named by its start; the process holds nothing under them yet.
      now: next ? (s.w + 1) * limit.windowMs : now,
      asked: next ? unitsToAsk(s.rate, limit.windowMs, 1) : unitsToAsk(s.rate, limit.windowMs, Math.max(need, s.waiting) - s.left),
      maxShare: this.lease.maxShare,
      held: next ? 0 : s.granted,
      adjust: next ? 0 : this.model.adjust(s),
      owner: this.owner,
    }
    let ok = true
    const inflight = Promise.resolve(this.telemetry.timed('lease', s.stem, () => this.store.lease!(request))).then(
      (g) => {
        if (this.resilience.degraded) this.resilience.answered(s.stem)
        const rtt = Math.max(0, this.clock() - now)
        s.rtt = s.rtt === 0 ? rtt : (s.rtt + rtt) / 2
        if (!this.model.accepts(s, request, g, limit.windowMs)) return
        this.model.adjusted(s, request.adjust)
        s.lessees = g.lessees
        s.remote = g.left
        if (g.restarted) {
          s.left = 0
          s.granted = 0
          s.spentUntil = this.model.emptyUntil(s, now, limit.windowMs)
          return
        }
        s.left += g.granted
        s.granted += g.granted
        s.size = g.granted
        this.model.took(s, g, limit, now)
        if (g.granted === 0) {
          s.emptyUntil = this.model.emptyUntil(s, now, limit.windowMs, g)
          s.emptyAskAt = now + REFUSAL_TRUST_MS
        }
      },
      (error: unknown) => {
        ok = false
        this.resilience.failed(error, s.stem, now)
      },
    )
    s.inflight = inflight
    return inflight.then(() => {
      if (s.inflight === inflight) s.inflight = undefined
      return ok
    })
  }

  /** The client's slice for the window containing `now`: a new window starts it empty (the last one's units lapse). */
  private slice(clientKey: string, limit: LimitSpec, now: number): Slice {
    let s = this.slices.get(clientKey)
    if (s === undefined) {
      if (this.slices.size >= MAX_SLICES) this.giveBackAll()
      s = newSlice(clientKey, this.parts.storeKey(clientKey), limit, now)
      this.slices.set(clientKey, s)
      this.arm()
    } else this.model.turn(s, now, limit)
    return s
  }

  /** The idle timer: gives back the slices of keys unused for `idleMs`. It never holds the process open. */
  private arm(): void {
    if (this.timer !== undefined) return
    this.timer = setInterval(() => this.giveBackIdle(), this.idleMs)
    unrefTimer(this.timer)
  }

  private giveBackIdle(): void {
    const now = this.clock()
    for (const s of this.slices.values()) {
      if (s.inflight !== undefined || s.waiting > 0 || now - s.lastUse < this.idleMs) continue
      // Units the fallback admitted wait for the next grant to reach Redis's count: kept until the window ends.
      if (s.offBook > 0 && windowIndex(now, this.windowMs) === s.w) continue
      this.slices.delete(s.clientKey)
      void this.giveBack(s, now).catch(() => undefined)
    }
    if (this.slices.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer)
      this.timer = undefined
    }
  }

  /** Ends the slice's lease in Redis, giving back its unspent units (none of an older window: they lapsed with it). */
  private giveBack(s: Slice, now: number): Promise<void> {
    this.model.turn(s, now, s.limit)
    if (!this.model.lessee(s, now, this.windowMs)) return Promise.resolve()
    const unspent = this.model.unspent(s)
    const limit = s.limit
    s.left = 0
    s.granted = 0
    const request: LeaseRequest = {
      algorithm: this.algorithm.name as LeaseRequest['algorithm'],
      stem: s.stem,
      limit,
      now,
      asked: 0,
      maxShare: 0,
      held: 0,
      adjust: 0,
      owner: this.owner,
    }
    return Promise.resolve(this.telemetry.timed('end_lease', s.stem, () => this.store.endLease!(request, unspent)))
  }

  private giveBackAll(): Promise<unknown> {
    const now = this.clock()
    const all = [...this.slices.values()].map((s) => this.giveBack(s, now).catch(() => undefined))
    this.slices = new Map()
    return Promise.all(all)
  }

  /** `reset`: the client's slice is dropped (its units lapse with the keys the reset deletes). */
  forget(clientKey: string): void {
    this.slices.delete(clientKey)
  }

  /** Gives back every slice and stops the idle timer (`limiter.close()`). */
  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
    await this.giveBackAll()
  }
}
