import type { Config } from '../options/parse-options'
import { type Decision, isThenable, type LimitSpec, type MaybePromise } from '../types'
import type { CallParts } from './call-parts'
import type { Resilience } from './failures'
import type { Telemetry } from './reporting'

/** What the lockout needs of the counting path it stands in front of (Counting). */
interface CountingPath {
  countAt(clientKey: string, limit: LimitSpec, cost: number, now: number): MaybePromise<Decision>
  finish(decision: Decision): Decision
  /** Drops what this process remembers of the client's counts (a reset elsewhere ended its block). */
  forgetHere(clientKey: string, limit: LimitSpec, now: number): void
}

/** Blocks kept in this process before the expired ones are dropped. */
const MAX_LOCAL_BLOCKS = 16384

/**
 * How long a block known in this process is trusted before the store is asked again: a `reset` in
 * another process deletes the store's block, and this process must not refuse the client until the
 * block's end on the strength of its own memory.
 */
const RECHECK_MS = 1000

/** A block known in this process: its end, and when the store last confirmed it (or this process set it). */
interface KnownBlock {
  until: number
  checked: number
}

/**
 * `blockDuration`: once a client goes over its limit, it is refused for the block's length from that
 * first refusal, whatever the window. The block is a key of its own in the store, `<store key>:block`,
 * with a TTL to match (so every process sharing the store honours it), and is also kept in this
 * process: a client this process has seen blocked is refused with no store call, like the over-limit
 * cache, except for one read of the block key per RECHECK_MS, so that a reset elsewhere ends the block
 * here too. A client not known to be blocked costs one read of the block key before it is counted.
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
  private readonly local = new Map<string, KnownBlock>()

  constructor(
    private readonly config: Config<unknown>,
    private readonly counting: CountingPath,
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
    const held = this.held(known, now)
    // Refused with no store call, and before the store key is even looked up, until the recheck is due.
    if (held > 0 && now - known!.checked < RECHECK_MS) return this.blocked(clientKey, limit, cost, now, held)
    const storeKey = this.parts.storeKey(clientKey)
    if (held > 0 && !this.canRead(storeKey, now)) return this.blocked(clientKey, limit, cost, now, held)
    let until: MaybePromise<number> = held
    try {
      if (this.canRead(storeKey, now)) until = this.read(storeKey, now)
    } catch (error) {
      this.readFailed(error, storeKey, now)
    }
    const then = (u: number): MaybePromise<Decision> => {
      if (u > now) {
        this.remember(clientKey, u, now)
        return this.blocked(clientKey, limit, cost, now, u)
      }
      if (known !== undefined) this.ended(clientKey, held, limit, now)
      const decision = this.counting.countAt(clientKey, limit, cost, now)
      return isThenable(decision) ? decision.then((d) => this.afterCount(d, clientKey, now)) : this.afterCount(decision, clientKey, now)
    }
    // A store that cannot say (it failed) does not block: the count still limits the client. A block
    // known here holds.
    return isThenable(until)
      ? until.then(then, (error) => {
          this.readFailed(error, storeKey, now)
          return then(held)
        })
      : then(until)
  }

  /**
   * The block `count` would refuse `clientKey` with at `now`, counting nothing and emitting nothing;
   * undefined when there is none. The same reads as `count`: the block known here, else the store's
   * (not read while the node's circuit is open). A failed read rejects, as a failed peek does, unless
   * a block is known here.
   */
  peek(clientKey: string, limit: LimitSpec, now: number): MaybePromise<Decision | undefined> {
    const known = this.local.get(clientKey)
    const storeKey = this.parts.storeKey(clientKey)
    const held = this.held(known, now)
    if (held > 0 && (now - known!.checked < RECHECK_MS || !this.canRead(storeKey, now)))
      return this.blockedAt(clientKey, limit, 0, now, held)
    if (!this.canRead(storeKey, now)) return undefined
    const until = this.read(storeKey, now)
    const then = (u: number): Decision | undefined => {
      if (u <= now) {
        if (known !== undefined) this.ended(clientKey, held, limit, now)
        return undefined
      }
      this.remember(clientKey, u, now)
      return this.blockedAt(clientKey, limit, 0, now, u)
    }
    if (!isThenable(until)) return then(until)
    return until.then(then, (error) => {
      if (held > 0) return this.blockedAt(clientKey, limit, 0, now, held)
      throw error
    })
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

  /**
   * The store has no block where this process knew one: it ran out, or, before its end (`held`), a
   * reset in another process ended it along with the counts, and the counts remembered here go too.
   */
  private ended(clientKey: string, held: number, limit: LimitSpec, now: number): void {
    this.local.delete(clientKey)
    if (held > 0) this.counting.forgetHere(clientKey, limit, now)
  }

  /** The end of the block known here on a client, 0 when none is. */
  private held(known: KnownBlock | undefined, now: number): number {
    return known !== undefined && known.until > now ? known.until : 0
  }

  /** The store keeps blocks, and the client's node is not known to be down. */
  private canRead(storeKey: string, now: number): boolean {
    return this.config.store.blockedUntil !== undefined && !this.resilience.isOpen(storeKey, now)
  }

  private read(storeKey: string, now: number): MaybePromise<number> {
    const store = this.config.store
    const key = `${storeKey}:block`
    return this.telemetry.timed('blocked_until', key, () => store.blockedUntil!(key, now))
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
      if (isThenable(written)) written.catch((error) => this.notWritten(error, clientKey, until))
    } catch (error) {
      this.notWritten(error, clientKey, until)
    }
    decision.resetAt = Math.max(decision.resetAt, until)
    decision.retryAfterMs = Math.max(decision.retryAfterMs, until - now)
    return decision
  }

  /**
   * The store did not take the block: it is kept here for its whole length, never rechecked, since
   * the store's answer (none) would only say that the write failed.
   */
  private notWritten(error: unknown, clientKey: string, until: number): void {
    this.emit('storeError', error)
    const known = this.local.get(clientKey)
    if (known !== undefined && known.until === until) known.checked = Number.POSITIVE_INFINITY
  }

  private blocked(clientKey: string, limit: LimitSpec, cost: number, now: number, until: number): Decision {
    return this.counting.finish(this.blockedAt(clientKey, limit, cost, now, until))
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
    if (this.local.size >= MAX_LOCAL_BLOCKS) for (const [k, b] of this.local) if (b.until <= now) this.local.delete(k)
    if (this.local.size < MAX_LOCAL_BLOCKS || this.local.has(clientKey)) this.local.set(clientKey, { until, checked: now })
  }

  private blockKey(clientKey: string): string {
    return `${this.parts.storeKey(clientKey)}:block`
  }
}
