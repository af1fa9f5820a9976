import { unrefTimer } from '../timers'
import { EventLoopUse } from './event-loop'
import { aimd, gradient2, type Interval, type LimitAlgorithm, type LimitAlgorithmName, vegas } from './limits'
import { type Issuer, Permit, type Priority, type Shed } from './permit'

export { Permit, PRIORITIES, type Priority, type Shed } from './permit'

/*
 * Adaptive concurrency: a per-process limit on requests in flight that follows the service's measured
 * latency (limits.ts), with priority classes. Under the limit a request enters at once. At the limit it
 * waits, at most queueTimeoutMs, in a short queue served highest class first (within a class see drain).
 * A full queue makes room by shedding its lowest class's oldest waiter. Once a request of a class is
 * refused, the lower classes' waiters are refused with it and their new requests for an interval after:
 * a slot one of them took would be one the higher class went without. So sheddable traffic is refused
 * first and critical traffic only when nothing else is left to shed.
 * This protects the service as a whole; it is per process and does not replace per-client limits.
 */

export interface AdaptiveGateConfig {
  readonly algorithm: LimitAlgorithmName
  readonly initialLimit: number
  readonly minLimit: number
  readonly maxLimit: number
  /** How far latency may grow over the baseline before the limit falls (1.5: by half). */
  readonly tolerance: number
  /** How long a request may wait for a slot; undefined: the baseline latency, half of it while the limit binds (see queueTimeout). */
  readonly queueTimeoutMs: number | undefined
  /** Waiters at most; undefined: as many as the limit. */
  readonly maxQueue: number | undefined
  /** Event-loop utilisation over which an interval counts as overloaded (0 < x ≤ 1), or undefined to ignore it. */
  readonly eventLoopUtilization: number | undefined
  readonly intervalMs: number
  readonly baselineWindowMs: number
  readonly clock: () => number
}

interface Waiter {
  readonly priority: Priority
  readonly since: number
  readonly resolve: (answer: Permit | Shed) => void
  timer: ReturnType<typeof setTimeout> | undefined
}

/** A refused request is told to come back after this: whole seconds, the shortest Retry-After. */
const RETRY_MS = 1000

/** The share of the limit held during a probe interval (see adjust). */
const PROBE_SHARE = 0.5

/** Fewer completions than this in an interval, and it is extended: a mean of a few requests is noise. */
const MIN_SAMPLES = 10

export class AdaptiveGate implements Issuer {
  private limitValue: number
  inflight = 0
  /** Requests in flight by class (rank). */
  private readonly holding = [0, 0, 0]
  private readonly queues: Waiter[][] = [[], [], []]
  private queued = 0
  /** By class: whether its queue was empty at some time in this interval; and whether it never was in the last. */
  private readonly emptied = [true, true, true]
  private readonly backlogged = [false, false, false]
  /** By class: when one of its requests was last refused. */
  private readonly refusedAt = [Number.NEGATIVE_INFINITY, Number.NEGATIVE_INFINITY, Number.NEGATIVE_INFINITY]
  private readonly algorithm: LimitAlgorithm
  /** The interval being measured. */
  private intervalStart: number
  private sumMs = 0
  private count = 0
  private peak = 0
  private overloads = 0
  /**
   * The mean latency of each past interval that measured the service unqueued (see adjust), with its
   * time: the baseline is the lowest over baselineWindowMs.
   */
  private readonly unqueued: Array<{ at: number; ms: number }> = []
  /** When the next probe starts, and the probe intervals left (2: the service drains, 1: it is measured). */
  private probeAt: number
  private probe = 0
  private lastMeanMs = 0
  /** Whether the last interval reached the limit (see queueTimeout). */
  private bound = false
  private readonly loop: EventLoopUse | undefined
  /** Refusals by class since the gate was made. */
  readonly shed: Record<Priority, number> = { critical: 0, normal: 0, sheddable: 0 }

  constructor(private readonly config: AdaptiveGateConfig) {
    this.limitValue = config.initialLimit
    this.algorithm =
      config.algorithm === 'aimd' ? aimd(config.tolerance) : config.algorithm === 'vegas' ? vegas() : gradient2(config.tolerance)
    this.intervalStart = config.clock()
    // The first intervals may already be queued, so the first probe comes soon: after ten intervals, unless one
    // of them was not bound (a process warming up reaches the limit for a moment without being overloaded).
    this.probeAt = this.intervalStart + 10 * config.intervalMs
    this.loop = config.eventLoopUtilization === undefined ? undefined : EventLoopUse.start()
  }

  /**
   * The current limit on requests in flight (a whole number). A probe lowers it for every class, critical
   * traffic too: were critical requests let past a probe, a service whose critical traffic alone fills it
   * (capacity halved) would never be measured unqueued, and its baseline, and with it the limit, would drift
   * up with the queue inside it. Critical waiters still pass the limit while lower classes hold slots (expire).
   */
  get limit(): number {
    return Math.floor(this.probe > 0 ? Math.max(this.config.minLimit, this.limitValue * PROBE_SHARE) : this.limitValue)
  }

  /** The latency without load the limit is measured against, ms (0 before the first interval). */
  get baselineMs(): number {
    let min = Number.POSITIVE_INFINITY
    for (const m of this.unqueued) if (m.ms < min) min = m.ms
    return Number.isFinite(min) ? min : 0
  }

  /** The last interval's mean latency, ms. */
  get latencyMs(): number {
    return this.lastMeanMs
  }

  get queueLength(): number {
    return this.queued
  }

  /** A permit now, or a promise of one or of a refusal. */
  acquire(priority: Priority): Permit | Promise<Permit | Shed> | Shed {
    const now = this.config.clock()
    const r = rank(priority)
    // While a higher class is being refused, a slot this request took would be one that class goes without.
    for (let higher = r + 1; higher < 3; higher++)
      if (now - this.refusedAt[higher]! < this.config.intervalMs) return this.refuse(priority, 'shedding', now)
    if (this.queued === 0 && this.inflight < this.limit) return this.admit(priority, now, now)
    const max = this.config.maxQueue ?? Math.max(1, this.limit)
    if (this.queued >= max && !this.displace(r, now)) return this.refuse(priority, 'full', now)
    return new Promise<Permit | Shed>((resolve) => {
      const waiter: Waiter = { priority, since: now, resolve, timer: undefined }
      waiter.timer = setTimeout(() => this.expire(waiter), this.queueTimeout())
      unrefTimer(waiter.timer)
      const queue = this.queues[r]!
      if (queue.length === 0) this.emptied[r] = true
      queue.push(waiter)
      this.queued++
    })
  }

  /** A permit's request ended: its latency is measured, and its slot goes to the best waiter. */
  ended(permit: Permit, overloaded: boolean): void {
    this.inflight--
    this.holding[rank(permit.priority)]!--
    const now = this.config.clock()
    const ms = now - permit.startedAt
    this.sumMs += ms
    this.count++
    if (overloaded) this.overloads++
    if (now - this.intervalStart >= this.config.intervalMs && (this.count >= MIN_SAMPLES || this.overloads > 0)) this.adjust(now)
    this.drain(now)
  }

  private admit(priority: Priority, now: number, since: number): Permit {
    this.inflight++
    this.holding[rank(priority)]!++
    if (this.inflight > this.peak) this.peak = this.inflight
    return new Permit(this, priority, now, now - since)
  }

  /** Refuses a request, and the waiters of every lower class with it: they are shed first. */
  private refuse(priority: Priority, reason: Shed['reason'], now: number): Shed {
    this.shed[priority]++
    const r = rank(priority)
    this.refusedAt[r] = now
    for (let lower = 0; lower < r; lower++) {
      const queue = this.queues[lower]!
      while (queue.length > 0) this.unqueue(queue.shift()!, 'shedding', now)
    }
    return { priority, reason, retryAfterMs: RETRY_MS }
  }

  /** Refuses a waiter already taken out of its queue. */
  private unqueue(waiter: Waiter, reason: Shed['reason'], now: number): void {
    this.queued--
    clearTimeout(waiter.timer)
    waiter.resolve(this.refuse(waiter.priority, reason, now))
  }

  /**
   * The wait allowed in the queue: the configured one; else, while the limit binds (the last interval reached
   * it: overload), half the service's unloaded latency, so that a request admitted from the queue takes at
   * most about one and a half times that; else the whole of it: the limit was not the bound, so this is a
   * burst, such as the one that follows a pause of the process (a collection, a descheduled core), which a
   * service that is not overloaded serves a few milliseconds later. 20 ms before the first measurement.
   */
  private queueTimeout(): number {
    if (this.config.queueTimeoutMs !== undefined) return this.config.queueTimeoutMs
    const baseline = this.baselineMs
    if (baseline === 0) return 20
    return Math.max(1, Math.ceil(this.bound ? baseline / 2 : baseline))
  }

  /** Makes room for a waiter of rank `r` by shedding the oldest waiter of a lower class; false when there is none. */
  private displace(r: number, now: number): boolean {
    for (let lower = 0; lower < r; lower++) {
      const queue = this.queues[lower]!
      if (queue.length === 0) continue
      this.unqueue(queue.shift()!, 'displaced', now)
      return true
    }
    return false
  }

  /**
   * A waiter's time is up. While lower classes hold more slots than the limit has been passed by, it is let in
   * past the limit instead of refused: that is a lower-class request shed, the one that would have had the next
   * free slot (none frees until the requests in flight are back under the limit). Otherwise it is refused.
   */
  private expire(waiter: Waiter): void {
    const r = rank(waiter.priority)
    const queue = this.queues[r]!
    const at = queue.indexOf(waiter)
    if (at === -1) return
    queue.splice(at, 1)
    const now = this.config.clock()
    let lower = 0
    for (let l = 0; l < r; l++) lower += this.holding[l]!
    if (this.inflight - this.limit >= lower) this.unqueue(waiter, 'timeout', now)
    else {
      this.queued--
      waiter.resolve(this.admit(waiter.priority, now, waiter.since))
    }
  }

  /**
   * Gives free slots to waiters, the highest class first. Within a class, the oldest first while its queue
   * empties now and then (a burst, served in order); the newest first once it has not emptied for a whole
   * interval (more of it comes than is served: its oldest waiters would be served only to be given up on).
   */
  private drain(now: number): void {
    for (let r = 2; r >= 0; r--) {
      const queue = this.queues[r]!
      while (queue.length > 0 && this.inflight < this.limit) {
        const waiter = this.backlogged[r] ? queue.pop()! : queue.shift()!
        this.queued--
        clearTimeout(waiter.timer)
        waiter.resolve(this.admit(waiter.priority, now, waiter.since))
      }
    }
  }

  /**
   * Ends the interval: the baseline and the limit move. An interval measures the service unqueued when
   * the limit was not reached in it (the traffic, not the limit, was the bound), or when it was a probe:
   * a limit held at PROBE_SHARE of itself for two intervals once the limit has bound every interval for a
   * third of the baseline window: in the first the requests queued inside the service drain, the second
   * measures it, so its unloaded latency is seen again even under sustained overload, and a service that
   * became slower for good is seen as such. Below the limit nothing is probed: nothing waits for a probe.
   */
  private adjust(now: number): void {
    const window = this.config.baselineWindowMs
    while (this.unqueued.length > 0 && this.unqueued[0]!.at < now - window) this.unqueued.shift()
    const meanMs = this.count > 0 ? this.sumMs / this.count : this.lastMeanMs
    const unbound = this.probe === 0 && this.peak < this.limit
    this.bound = !unbound
    if (this.count > 0 && (unbound || this.probe === 1 || this.unqueued.length === 0)) this.unqueued.push({ at: now, ms: meanMs })
    // An interval the limit did not bound measured the service as a probe would: no probe is due for a while.
    if (unbound) this.probeAt = now + window / 3
    const probed = this.probe > 0
    if (this.probe > 0) this.probe--
    else if (now >= this.probeAt) {
      this.probe = 2
      this.probeAt = now + window / 3
    }
    const overloaded = this.overloads > 0 || (this.loop !== undefined && this.loop.sinceLast() > this.config.eventLoopUtilization!)
    const interval: Interval = { meanMs, baselineMs: Math.max(this.baselineMs, 0.001), peakInflight: this.peak, overloaded }
    const { minLimit, maxLimit } = this.config
    // A probe's interval says what the service does unqueued, not what the limit should be.
    if (!probed) this.limitValue = Math.max(minLimit, Math.min(maxLimit, this.algorithm.next(this.limitValue, interval)))
    for (let r = 0; r < 3; r++) {
      this.backlogged[r] = !this.emptied[r] && this.queues[r]!.length > 0
      this.emptied[r] = this.queues[r]!.length === 0
    }
    this.lastMeanMs = meanMs
    this.intervalStart = now
    this.sumMs = 0
    this.count = 0
    this.peak = this.inflight
    this.overloads = 0
  }
}

function rank(priority: Priority): number {
  return priority === 'critical' ? 2 : priority === 'normal' ? 1 : 0
}
