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
 *
 * `peek` reports a block as `count` would refuse with it, and `forget` (the limiter's `reset`) ends it,
 * here and in the store: an unlocked account must not stay locked until the block runs out.
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
  ) {
    const { store, logger } = config
    if (config.blockMs > 0 && store.block !== undefined && store.unblock === undefined) {
      // Without it, `reset` forgets the counts but the store's block keeps refusing the client.
      logger.warn(
        'Tollgate: the store keeps blocks (block()) but has no unblock(), so reset() cannot end a blockDuration lockout there: it runs out at its end',
      )
    }
  }

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

  /**
   * The block `count` would refuse `clientKey` with at `now`, counting nothing and emitting nothing;
   * undefined when there is none. The same reads as `count`: the block known here, else the store's
   * (not read while the node's circuit is open). A failed read rejects, as a failed peek does.
   */
  peek(clientKey: string, limit: LimitSpec, now: number): MaybePromise<Decision | undefined> {
    const known = this.local.get(clientKey)
    if (known !== undefined && known > now) return this.blockedAt(clientKey, limit, 0, now, known)
    const store = this.config.store
    const storeKey = this.parts.storeKey(clientKey)
    if (store.blockedUntil === undefined || this.resilience.isOpen(storeKey, now)) return undefined
    const key = `${storeKey}:block`
    const until = this.telemetry.timed('blocked_until', key, () => store.blockedUntil!(key, now))
    const then = (u: number): Decision | undefined => {
      if (u <= now) return undefined
      this.remember(clientKey, u, now)
      return this.blockedAt(clientKey, limit, 0, now, u)
    }
    return isThenable(until) ? until.then(then) : then(until)
  }

  /**
   * Ends the client's block: in this process at once, and in the store (`unblock`). Called after the
   * store's `forget` was sent, so a request that no longer finds the block finds no count either.
   */
  forget(clientKey: string): MaybePromise<void> {
    this.local.delete(clientKey)
    const store = this.config.store
    if (store.unblock === undefined) return
    const key = this.blockKey(clientKey)
    return this.telemetry.timed('unblock', key, () => store.unblock!(key))
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
    return this.counter.finish(this.blockedAt(clientKey, limit, cost, now, until))
  }

  /** The refusal of a blocked client, before `finish` reports it. */
  private blockedAt(clientKey: string, limit: LimitSpec, cost: number, now: number, until: number): Decision {
    return {
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
    }
  }

  private remember(clientKey: string, until: number, now: number): void {
    if (this.local.size >= MAX_LOCAL_BLOCKS) for (const [k, u] of this.local) if (u <= now) this.local.delete(k)
    if (this.local.size < MAX_LOCAL_BLOCKS) this.local.set(clientKey, until)
  }

  private blockKey(clientKey: string): string {
    return `${this.parts.storeKey(clientKey)}:block`
  }
}
