import type { Config } from '../options/parse-options'
import { type Decision, isThenable, type LimitSpec, type MaybePromise } from '../types'
import type { CallParts } from './call-parts'
import type { Resilience } from './resilience'
import type { Telemetry } from './telemetry'

/** What the lockout needs of the counting path. */
interface Counter {
  countAt(clientKey: string, limit: LimitSpec, cost: number, now: number): MaybePromise<Decision>
  finish(decision: Decision): Decision
}

/** Blocks kept in this process before the expired ones are dropped. */
const MAX_LOCAL_BLOCKS = 16384

/**
 * `blockDuration`: once a client goes over its limit, it is refused for the block's length from that
 * first refusal, whatever the window. The block is a key of its own in the store, `<store key>:block`,
 * with a TTL to match (so every process sharing the store honours it), and is also kept in this
 * process: a client this process has seen blocked is refused with no store call, like the over-limit
 * cache. A client not known to be blocked costs one read of the block key before it is counted.
 *
 * While the circuit of the client's store node is open, the block key is not read: the read would
 * only wait out the store's deadline on every request, and the count that follows goes to the failure
 * policy at once anyway. Blocks known in this process still hold. A failed read opens the circuit as a
 * failed count does, so the count after it does not wait out a second deadline.
 */
export class Lockout {
  private readonly local = new Map<string, number>()

  constructor(
    private readonly config: Config<unknown>,
    private readonly counter: Counter,
    private readonly parts: CallParts,
    private readonly resilience: Resilience,
    private readonly telemetry: Telemetry,
    private readonly emit: (event: string, value?: unknown) => void,
  ) {}

  count(clientKey: string, limit: LimitSpec, cost: number, now: number): MaybePromise<Decision> {
    const known = this.local.get(clientKey)
    if (known !== undefined) {
      if (known > now) return this.blocked(clientKey, limit, cost, now, known)
      this.local.delete(clientKey)
    }
    const store = this.config.store
    const storeKey = this.parts.storeKey(clientKey)
    const key = `${storeKey}:block`
    let until: MaybePromise<number> = 0
    try {
      if (store.blockedUntil !== undefined && !this.resilience.isOpen(storeKey, now))
        until = this.telemetry.timed('blocked_until', key, () => store.blockedUntil!(key, now))
    } catch (error) {
      this.readFailed(error, storeKey, now)
    }
    const then = (u: number): MaybePromise<Decision> => {
      if (u > now) {
        this.remember(clientKey, u, now)
        return this.blocked(clientKey, limit, cost, now, u)
      }
      const decision = this.counter.countAt(clientKey, limit, cost, now)
      return isThenable(decision) ? decision.then((d) => this.afterCount(d, clientKey, now)) : this.afterCount(decision, clientKey, now)
    }
    // A store that cannot say (it failed) does not block: the count still limits the client.
    return isThenable(until)
      ? until.then(then, (error) => {
          this.readFailed(error, storeKey, now)
          return then(0)
        })
      : then(until)
  }

  /** The block read failed: reported, and on a remote store it opens the node's circuit as a failed count does. */
  private readFailed(error: unknown, storeKey: string, now: number): void {
    if (this.config.store.local) this.emit('storeError', error)
    else this.resilience.failed(error, storeKey, now)
  }

  /** A refusal starts a block: kept here and written to the store; the decision shows its end. */
  private afterCount(decision: Decision, clientKey: string, now: number): Decision {
    if (decision.allowed || decision.denied === true) return decision
    const until = now + this.config.blockMs
    this.remember(clientKey, until, now)
    const store = this.config.store
    const key = this.blockKey(clientKey)
    try {
      const written = store.block === undefined ? undefined : this.telemetry.timed('block', key, () => store.block!(key, until, now))
      if (isThenable(written)) written.catch((error) => this.emit('storeError', error))
    } catch (error) {
      this.emit('storeError', error)
    }
    decision.resetAt = Math.max(decision.resetAt, until)
    decision.retryAfterMs = Math.max(decision.retryAfterMs, until - now)
    return decision
  }

  private blocked(clientKey: string, limit: LimitSpec, cost: number, now: number, until: number): Decision {
    return this.counter.finish({
      allowed: false,
      limit: limit.max,
      remaining: 0,
      count: limit.max,
      resetAt: until,
      retryAfterMs: until - now,
      at: now,
      key: clientKey,
      policy: limit.policy,
      source: this.config.store.local ? 'store' : 'cache',
      cost,
    })
  }

  private remember(clientKey: string, until: number, now: number): void {
    if (this.local.size >= MAX_LOCAL_BLOCKS) for (const [k, u] of this.local) if (u <= now) this.local.delete(k)
    if (this.local.size < MAX_LOCAL_BLOCKS) this.local.set(clientKey, until)
  }

  private blockKey(clientKey: string): string {
    return `${this.parts.storeKey(clientKey)}:block`
  }
}
