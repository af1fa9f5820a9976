import type { Algorithm } from '../algorithms'
import { scopedStem, storeKey } from '../keys'
import { makeLimit } from '../options/limits'
import type { Config } from '../options/parse-options'
import type { Decision, LimitSpec, StoreCall } from '../types'

/** Dynamic `max` values whose limits (and so policy strings) are kept built. */
const MAX_CACHED_LIMITS = 256
/** Store keys kept built, per limiter; the memo starts over when it reaches this size. */
const MAX_CACHED_STORE_KEYS = 16384

/**
 * The keys of one request when limits have keys of their own (`limits[i].key`): the call's store key
 * (the client's, or the hash tag's with `hashTag`), and each limit's key stem and client key.
 */
export interface CallScope {
  readonly storeKey: string
  readonly stems: readonly string[]
  readonly keys: readonly string[]
}

/** What a store call is made of, built once and kept: store keys, limits, call ids. */
export class CallParts {
  private readonly limits = new Map<number, LimitSpec>()
  private lastMax = -1
  private lastLimit: LimitSpec | undefined
  /** Limits of a `window` function's windows, by max and window. */
  private readonly windowed = new Map<string, LimitSpec>()
  /**
   * Store keys by client key. A client's requests then share one key string, whose hash V8 keeps:
   * building and hashing a fresh prefix+{key} per request was a large share of the memory store's time (bench/hot-path.mjs).
   */
  private storeKeys = new Map<string, string>()
  private sequence = 0
  /** Six base-36 characters: a call id names every sliding-log entry, so its length is memory in Redis. */
  private readonly instance = Math.random().toString(36).slice(2, 8)

  constructor(
    private readonly config: Config<unknown>,
    private readonly algorithm: Algorithm,
  ) {}

  call(clientKey: string, limits: readonly LimitSpec[], cost: number, now: number, scope?: CallScope): StoreCall {
    if (scope !== undefined) {
      const { storeKey, stems, keys } = scope
      return { algorithm: this.algorithm.name, storeKey, limits, cost, now, id: this.nextId(), stems, keys }
    }
    return { algorithm: this.algorithm.name, storeKey: this.storeKey(clientKey), limits, cost, now, id: this.nextId() }
  }

  /**
   * The keys of a request of a limiter whose limits have keys of their own: `own[i]` is limit i's key
   * (as stored), undefined for a limit counted under `clientKey`; `tag` the hash tag (as stored), if any.
   */
  scope(clientKey: string, own: readonly (string | undefined)[], tag: string | undefined): CallScope {
    const limits = this.config.limits!
    const { prefix } = this.config
    const stems: string[] = []
    const keys: string[] = []
    for (let i = 0; i < limits.length; i++) {
      const key = own[i] ?? clientKey
      keys.push(key)
      stems.push(scopedStem(prefix, tag, key, limits[i]!.label))
    }
    return { storeKey: tag === undefined ? this.storeKey(clientKey) : storeKey(prefix, tag), stems, keys }
  }

  /**
   * The call behind an admitted decision of this limiter, rebuilt from it: its client key, time, cost
   * and limits (recognised by their policies, so a decision of another limiter is not taken for one of
   * this one's). Undefined when the algorithm's refund needs the original call's id (refundsByCallId).
   */
  rebuild(decision: Decision): StoreCall | undefined {
    // A decision over per-limit keys does not say its hash tag: its call is kept (counting.ts keepCalls).
    if (this.algorithm.refundsByCallId || this.config.limitKeys !== undefined) return undefined
    let limits = this.limitsFor(this.limitFor(decision.limit))
    // A window of a `window` function: its own limit, kept built with its policy.
    if (!limits.some((l) => l.policy === decision.policy) && this.config.window !== undefined)
      limits = [this.windowedLimit(decision.limit, decision.policy.windowMs)]
    if (!limits.some((l) => l.policy === decision.policy)) return undefined
    return this.call(decision.key, limits, decision.cost, decision.at)
  }

  nextId(): string {
    this.sequence = (this.sequence + 1) % 1e9
    return `${this.instance}:${this.sequence.toString(36)}`
  }

  storeKey(clientKey: string): string {
    let key = this.storeKeys.get(clientKey)
    if (key === undefined) {
      if (this.storeKeys.size >= MAX_CACHED_STORE_KEYS) this.storeKeys = new Map()
      key = storeKey(this.config.prefix, clientKey)
      this.storeKeys.set(clientKey, key)
    }
    return key
  }

  limitsFor(limit: LimitSpec): readonly LimitSpec[] {
    return this.config.limits ?? [limit]
  }

  /** The limit of `max` per `windowMs` from a `window` function: its label is part of its keys, so two windows never share a count. */
  windowedLimit(max: number, windowMs: number): LimitSpec {
    const id = `${max}/${windowMs}`
    let limit = this.windowed.get(id)
    if (limit === undefined) {
      const { name, burst } = this.config
      limit = makeLimit(max, windowMs, burst, name, true)
      if (this.windowed.size < MAX_CACHED_LIMITS) this.windowed.set(id, limit)
    }
    return limit
  }

  /** The fast path's key of `limit` for a client: the store key, with the label for a keyed limit (as keys.ts stem). */
  fastKey(clientKey: string, limit: LimitSpec): string {
    const key = this.storeKey(clientKey)
    return limit.keyed === true ? `${key}:${limit.label}` : key
  }

  limitFor(max: number): LimitSpec {
    // Nearly always the same max as the request before (a number option): no map lookup then.
    if (max === this.lastMax) return this.lastLimit!
    let limit = this.limits.get(max)
    if (limit === undefined) {
      const { windowMs, name, burst } = this.config
      limit = makeLimit(max, windowMs, burst, name, false, this.algorithm.releases === true)
      if (this.limits.size < MAX_CACHED_LIMITS) this.limits.set(max, limit)
    }
    this.lastMax = max
    this.lastLimit = limit
    return limit
  }
}
