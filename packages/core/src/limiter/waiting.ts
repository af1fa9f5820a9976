import type { Config } from '../options/parse-options'
import { type Decision, isThenable, type LimitSpec, type MaybePromise } from '../types'
import type { CallScope } from './call-parts'
import { MAX_TIMER_MS } from './wait-arguments'
import { asRefused, isFinal, untried } from './wait-refusals'

export { type WaitOptions, waitArguments } from './wait-arguments'

/**
 * What the waiting needs from its limiter: one ordinary count, the limits a count of `max` is decided by
 * (the same the count's decisions report), and the refund of an admission nobody wants any more.
 */
export interface WaitingHost {
  /**
   * The limiter's count of `cost` units against a client key as stored, and per-limit keys (`scope`) as
   * `consume` takes them, with the failure policy and the events of `consume`.
   */
  count(clientKey: string, cost: number, max: number, scope: CallScope | undefined): MaybePromise<Decision>
  limitsOf(max: number): readonly LimitSpec[]
  refund(decision: Decision): Promise<void>
}

interface Waiter {
  readonly cost: number
  readonly max: number
  readonly scope: CallScope | undefined
  /** Clock time (epoch ms) at which the wait ends refused. */
  readonly deadline: number
  readonly resolve: (decision: Decision) => void
  readonly reject: (error: unknown) => void
  readonly signal: AbortSignal | undefined
  onAbort: (() => void) | undefined
  timer: ReturnType<typeof setTimeout> | undefined
  done: boolean
}

/**
 * The waiters of one client key, first come first served. Only the head tries; the others wait for
 * their turn, so a later waiter never takes a unit an earlier one is waiting for.
 */
interface Queue {
  /** The queue's own key in the map: the client key, and the per-limit keys when the limits have their own. */
  readonly id: string
  /** The client key as stored. */
  readonly key: string
  waiters: Waiter[]
  /** Waiters in `waiters` that are not done (done ones are skipped when they reach the front). */
  live: number
  /** The head whose try is at the store. */
  trying: Waiter | undefined
  /** The head's sleep until `nextTryAt`. */
  timer: ReturnType<typeof setTimeout> | undefined
  /** When the last refusal said a try could succeed (its `at + retryAfterMs`). */
  nextTryAt: number
  /** The queue's last decision: what a waiter that ends without a try of its own is told. */
  last: Decision | undefined
}

/**
 * `limiter.wait`: per client key, a queue whose head counts with the limiter's ordinary path and,
 * when refused, sleeps until the refusal's `retryAfterMs` before trying again. Nothing polls: a key
 * with waiters has at most one sleep timer, and each waiter one timer for its deadline; a key's
 * queue is dropped with its last waiter, and every timer with the waiter or queue it belongs to, so
 * nothing is left to keep the process alive once no one waits.
 */
export class Waiting {
  private readonly queues = new Map<string, Queue>()

  constructor(
    private readonly config: Config<unknown>,
    private readonly host: WaitingHost,
  ) {}

  /** Waiters of this limiter still waiting, over every key (for tests and diagnostics). */
  get size(): number {
    let n = 0
    for (const q of this.queues.values()) n += q.live
    return n
  }

  /** Client keys with a queue (dropped with their last waiter). */
  get keys(): number {
    return this.queues.size
  }

  /**
   * Resolves to an admitted decision once the limit admits `cost` units for `clientKey` and the
   * per-limit keys of `scope` (after every earlier waiter on those keys), or to a refused one at the
   * deadline or on abort.
   */
  wait(
    clientKey: string,
    scope: CallScope | undefined,
    cost: number,
    max: number,
    maxWaitMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Decision> {
    const now = this.config.clock()
    // Waiters queue per target: a user's waits with different tenants count different keys.
    const id = scope === undefined ? clientKey : `${clientKey}\u0000${scope.storeKey}\u0000${scope.keys.join('\u0000')}`
    let queue = this.queues.get(id)
    if (signal?.aborted === true) return Promise.resolve(this.refused(queue?.last, clientKey, cost, max, now))
    return new Promise<Decision>((resolve, reject) => {
      if (queue === undefined) {
        queue = { id, key: clientKey, waiters: [], live: 0, trying: undefined, timer: undefined, nextTryAt: 0, last: undefined }
        this.queues.set(id, queue)
      }
      const q = queue
      const w: Waiter = {
        cost,
        max,
        scope,
        deadline: now + maxWaitMs,
        resolve,
        reject,
        signal,
        onAbort: undefined,
        timer: undefined,
        done: false,
      }
      q.waiters.push(w)
      q.live++
      this.pump(q)
      if (w.done) return
      w.timer = setTimeout(() => this.expire(q, w), maxWaitMs)
      if (signal !== undefined) {
        w.onAbort = () => this.abort(q, w)
        signal.addEventListener('abort', w.onAbort, { once: true })
      }
    })
  }

  /** Tries the head of `q` while nothing is at the store, it is time, and tries admit; sleeps otherwise. */
  private pump(q: Queue): void {
    while (q.trying === undefined && q.timer === undefined) {
      const head = this.head(q)
      if (head === undefined) return
      const now = this.config.clock()
      if (now < q.nextTryAt) {
        q.timer = setTimeout(() => this.wake(q), Math.min(q.nextTryAt - now, MAX_TIMER_MS))
        return
      }
      let decision: MaybePromise<Decision>
      try {
        decision = this.host.count(q.key, head.cost, head.max, head.scope)
      } catch (error) {
        // A store in this process threw (a store elsewhere fails into the failure policy instead).
        this.leave(q, head)
        head.reject(error)
        continue
      }
      if (isThenable(decision)) {
        q.trying = head
        decision.then(
          (d) => this.answered(q, head, d),
          (error: unknown) => {
            q.trying = undefined
            if (!head.done) {
              this.leave(q, head)
              head.reject(error)
            }
            this.pump(q)
          },
        )
        return
      }
      this.answered(q, head, decision, false)
    }
  }

  /** The first waiter not done, done ones dropped from the front; the queue itself is dropped when none is left. */
  private head(q: Queue): Waiter | undefined {
    const waiters = q.waiters
    while (waiters.length > 0 && waiters[0]!.done) waiters.shift()
    const head = waiters[0]
    if (head === undefined && q.trying === undefined) this.drop(q)
    return head
  }

  /** A try's decision for `w`, the head. `more` when called from a promise: the queue goes on from here. */
  private answered(q: Queue, w: Waiter, d: Decision, more = true): void {
    q.trying = undefined
    q.last = d
    const final = !d.allowed && isFinal(d, w.cost, w.max, this.host)
    // The queue sleeps until the refusal says a try could pass; a final refusal says nothing of the
    // waiters behind (they may be cheaper, or the failure policy may admit them).
    if (!d.allowed && !final) q.nextTryAt = d.at + d.retryAfterMs
    if (w.done) {
      // The waiter was aborted while its try was at the store: an admission nobody takes is given back.
      if (d.allowed) this.host.refund(d).catch(() => {})
    } else if (d.allowed || final) {
      this.leave(q, w)
      w.resolve(d)
    } else {
      // A try that was at the store when the deadline passed has had its answer: the wait ends with it.
      if (this.config.clock() >= w.deadline) {
        this.leave(q, w)
        w.resolve(this.refused(d, q.key, w.cost, w.max, this.config.clock()))
      }
    }
    if (more) this.pump(q)
  }

  /** The head's sleep is over: try again (or sleep the rest, when the timer fired before the clock got there). */
  private wake(q: Queue): void {
    q.timer = undefined
    this.pump(q)
  }

  /** `w`'s deadline timer. */
  private expire(q: Queue, w: Waiter): void {
    w.timer = undefined
    if (w.done) return
    const now = this.config.clock()
    if (now < w.deadline) {
      // The timer and the limiter's clock disagree by a little: wait out the rest.
      w.timer = setTimeout(() => this.expire(q, w), Math.min(w.deadline - now, MAX_TIMER_MS))
      return
    }
    const head = this.head(q)
    if (head !== undefined && head.deadline <= now && q.timer !== undefined && now >= q.nextTryAt) {
      // The head's try is due at its deadline: the try comes first, and its answer ends the wait.
      clearTimeout(q.timer)
      q.timer = undefined
      this.pump(q)
    }
    // Every waiter of the queue whose deadline has passed ends now, in arrival order: a timer that
    // fired a little early by the clock must not let a later waiter's end overtake an earlier one's.
    // A try at the store decides its own waiter's end when it answers (the store's deadline bounds it).
    for (const waiter of q.waiters) {
      if (waiter.done || waiter === q.trying || waiter.deadline > now) continue
      this.leave(q, waiter)
      waiter.resolve(this.refused(q.last, q.key, waiter.cost, waiter.max, now))
    }
    if (q.waiters.length > 0) q.waiters = q.waiters.filter((waiter) => !waiter.done)
    this.pump(q)
  }

  /** `w`'s signal aborted: the wait ends now, whether or not its try is at the store. */
  private abort(q: Queue, w: Waiter): void {
    if (w.done) return
    const now = this.config.clock()
    this.leave(q, w)
    w.resolve(this.refused(q.last, q.key, w.cost, w.max, now))
    this.pump(q)
  }

  /** Marks `w` done and lets go of its timer and its abort listener. */
  private leave(q: Queue, w: Waiter): void {
    w.done = true
    q.live--
    if (w.timer !== undefined) clearTimeout(w.timer)
    w.timer = undefined
    if (w.onAbort !== undefined) w.signal!.removeEventListener('abort', w.onAbort)
    w.onAbort = undefined
    if (q.live === 0) {
      if (q.timer !== undefined) clearTimeout(q.timer)
      q.timer = undefined
      q.waiters.length = 0
      if (q.trying === undefined) this.drop(q)
    }
  }

  private drop(q: Queue): void {
    if (this.queues.get(q.id) === q) this.queues.delete(q.id)
  }

  /**
   * The refused decision of a wait that ends without an admission: the queue's last decision as of
   * `now`, with this wait's cost, or (when its queue has no decision yet) one that says only which
   * limit it was. It was counted nowhere; `retryAfterMs` is the time left until the queue's next try.
   */
  private refused(last: Decision | undefined, key: string, cost: number, max: number, now: number): Decision {
    return last === undefined ? untried(this.host.limitsOf(max)[0]!, key, cost, now) : asRefused(last, cost, now)
  }
}
