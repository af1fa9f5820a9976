import type { Algorithm } from '../../algorithms'
import { decide } from '../../algorithms/decision'
import { windowIndex } from '../../keys'
import type { Config } from '../../options/parse-options'
import { KIT } from '../../registry'
import { type Decision, type DecisionSource, isThenable, type LimitSpec, type MaybePromise, type Store } from '../../types'
import type { CallParts } from '../call-parts'
import type { Resilience } from '../failures'
import { LocalCells } from '../fast-path/local-cells'
import type { MirrorCells, MirrorEntry } from '../fast-path/mirror-cells'
import type { OverLimit } from '../fast-path/over-limit'
import type { RefundLedger } from '../refund-ledger'
import type { RemoteKit } from '../remote'
import type { Telemetry } from '../reporting'
import type { CountPath, PathHost } from './count-path'

/*
 * The increment path: a single limit of an algorithm that `increments` (the fixed window) on a store with
 * `increment`, one INCRBY per request, batched and merged in Redis. It counts refused requests too, so a
 * client over the limit stays over for the rest of the window: a remote store's refusals are kept (the
 * over-limit cache) and answered without a round trip. On the memory store, the client's cell is counted
 * in place (local cells); on a remote store with the fallback, each client's key and last count are kept
 * in one entry (mirror cells), so the fallback continues from the store's count.
 */
export class IncrementPath implements CountPath {
  /** Clients already over the limit in this window (fast-path/over-limit.ts). */
  /** The over-limit cache, for a remote store only. */
  private readonly over: OverLimit | undefined
  /** The memory store's cells of this limiter's clients (fast-path/local-cells.ts); unset for other stores and with refunds. */
  private readonly cells: LocalCells | undefined
  /** A remote store with the fallback: each client's store key and last returned count (fast-path/mirror-cells.ts), one lookup. */
  private readonly mirror: MirrorCells | undefined
  private readonly remote: boolean
  private readonly windowMs: number
  private readonly store: Store

  constructor(
    config: Config<unknown>,
    private readonly algorithm: Algorithm,
    private readonly parts: CallParts,
    private readonly resilience: Resilience,
    private readonly telemetry: Telemetry,
    private readonly ledger: RefundLedger,
    /** The refund options: each decision's call is kept (it needs the store key), and a refund elsewhere can lower a count. */
    private readonly refunds: boolean,
    private readonly host: PathHost,
  ) {
    this.remote = !config.store.local
    this.windowMs = config.windowMs
    this.store = config.store
    this.cells = refunds ? undefined : LocalCells.of(config.store, parts)
    // Registered whenever the store is remote (limiter.ts refuses a remote store otherwise).
    const kit = KIT.remote as RemoteKit
    this.over = this.remote ? new kit.OverLimit() : undefined
    this.mirror =
      this.remote && !refunds && config.onStoreError === 'fallback'
        ? new kit.MirrorCells(parts, resilience.fallback, config.windowMs)
        : undefined
  }

  known(clientKey: string, limit: LimitSpec, cost: number, now: number): Decision | undefined {
    // Off with refunds: a refund elsewhere can bring a count back under the limit.
    if (!this.remote || this.refunds || limit.keyed === true) return undefined
    const known = this.over!.known(clientKey, windowIndex(now, this.windowMs), now)
    if (known === undefined || known + cost <= limit.max) return undefined
    return this.fromCount(clientKey, undefined, known + cost, limit, cost, now, 'cache')
  }

  count(fallback: boolean, clientKey: string, limit: LimitSpec, cost: number, now: number): MaybePromise<Decision> {
    const source: DecisionSource = fallback ? 'fallback' : 'store'
    const store = fallback ? this.resilience.fallback : this.store
    // No closure here: a function that creates one allocates its captured variables on every call,
    // taken or not. The continuations of a promise are built in `settled`.
    // The configured store's calls are timed (telemetry.ts), not the fallback's.
    const started = source === 'store' ? this.telemetry.start() : -1
    const own = source === 'store' && limit.keyed !== true
    const cells = this.cells
    if (cells?.current && started < 0 && own) {
      return this.fromCount(clientKey, undefined, cells.add(clientKey, cost, limit.windowMs, now), limit, cost, now, source)
    }
    const entry = own ? this.mirror?.entry(clientKey, now) : undefined
    const key = entry !== undefined ? entry.key : this.parts.fastKey(clientKey, limit)
    let counted: MaybePromise<number>
    try {
      counted = store.increment!(key, cost, limit.windowMs, now)
    } catch (error) {
      if (started >= 0) this.telemetry.threw('increment', key, started, error)
      throw error
    }
    if (started >= 0) counted = this.telemetry.settle('increment', key, started, counted)
    if (!isThenable(counted)) return this.fromCount(clientKey, key, counted, limit, cost, now, source, entry)
    return this.settled(counted, key, clientKey, limit, cost, now, source, entry)
  }

  private settled(
    counted: Promise<number>,
    key: string,
    clientKey: string,
    limit: LimitSpec,
    cost: number,
    now: number,
    source: DecisionSource,
    entry: MirrorEntry | undefined,
  ): Promise<Decision> {
    const failed = source === 'store' && this.remote ? (error: unknown) => this.host.failed(error, clientKey, limit, cost, now) : undefined
    return counted.then((n) => this.fromCount(clientKey, key, n, limit, cost, now, source, entry), failed)
  }

  /** The decision from the count INCRBY returned (`key` unset for a kept verdict; `entry`, the client's mirror entry). */
  private fromCount(
    clientKey: string,
    key: string | undefined,
    count: number,
    limit: LimitSpec,
    cost: number,
    now: number,
    source: DecisionSource,
    entry?: MirrorEntry,
  ): Decision {
    const { max, windowMs } = limit
    if (source === 'store' && this.remote && key !== undefined) {
      const r = this.resilience
      if (r.degraded) r.answered(key)
      if (entry === undefined) count = r.mirrorCount(key, windowMs, now, count, cost)
      else {
        count = r.afterFallback(key, windowMs, now, count, cost)
        this.mirror!.keep(entry, count, now)
      }
      if (count > max && !this.refunds && limit.keyed !== true) this.over!.remember(clientKey, count, windowIndex(now, windowMs), now)
    }
    const decision = decide(this.algorithm, limit, count - cost, count, count <= max, cost, now, clientKey, source)
    if (this.refunds && decision.allowed && key !== undefined) {
      this.ledger.keep(decision, { algorithm: this.algorithm.name, storeKey: key, limits: [limit], cost, now, id: this.parts.nextId() })
    }
    return this.host.finish(decision)
  }

  handOver(clientKey: string, now: number): void {
    this.mirror?.handOver(clientKey, now)
  }

  forget(clientKey: string): void {
    this.over?.forget(clientKey)
    this.cells?.forget(clientKey)
    this.mirror?.forget(clientKey)
  }
}
