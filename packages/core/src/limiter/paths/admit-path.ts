import type { Algorithm } from '../../algorithms'
import { decisionOf } from '../../algorithms/decision'
import {
  type Decision,
  type DecisionSource,
  isThenable,
  type LimitSpec,
  type MaybePromise,
  type Store,
  type StoreCall,
  type StoreResult,
} from '../../types'
import type { CallParts, CallScope } from '../call-parts'
import type { Resilience } from '../failures'
import type { RefundLedger } from '../refund-ledger'
import type { Telemetry } from '../reporting'
import type { CountPath, PathHost } from './count-path'

/*
 * The admit path: one atomic `admit` for every limit of the request (the scripts, all-or-nothing), the
 * decision from the store's numbers through the algorithm's verdict (algorithms/decision.ts).
 */
export class AdmitPath implements CountPath {
  private readonly remote: boolean

  constructor(
    private readonly algorithm: Algorithm,
    private readonly parts: CallParts,
    private readonly resilience: Resilience,
    private readonly telemetry: Telemetry,
    private readonly ledger: RefundLedger,
    /** Keep every admitted decision's call: with the refund options, per-limit keys, or when the algorithm refunds by call id. */
    private readonly keepCalls: boolean,
    private readonly store: Store,
    private readonly host: PathHost,
  ) {
    this.remote = !store.local
  }

  known(): undefined {
    return undefined
  }

  count(fallback: boolean, clientKey: string, limit: LimitSpec, cost: number, now: number, scope?: CallScope): MaybePromise<Decision> {
    const source: DecisionSource = fallback ? 'fallback' : 'store'
    const store = fallback ? this.resilience.fallback : this.store
    const started = source === 'store' ? this.telemetry.start() : -1
    const call = this.parts.call(clientKey, this.parts.limitsFor(limit), cost, now, scope)
    let result: MaybePromise<StoreResult>
    try {
      result = store.admit(call)
    } catch (error) {
      if (started >= 0) this.telemetry.threw('admit', call.storeKey, started, error)
      throw error
    }
    if (started >= 0) result = this.telemetry.settle('admit', call.storeKey, started, result)
    if (!isThenable(result)) return this.fromResult(call, result, clientKey, source)
    return this.settled(result, call, clientKey, limit, cost, now, source, scope)
  }

  /** The decision once the store's promise settles (apart from `count`, which then allocates no closure). */
  private settled(
    result: Promise<StoreResult>,
    call: StoreCall,
    clientKey: string,
    limit: LimitSpec,
    cost: number,
    now: number,
    source: DecisionSource,
    scope: CallScope | undefined,
  ): Promise<Decision> {
    const failed =
      source === 'store' && this.remote ? (error: unknown) => this.host.failed(error, clientKey, limit, cost, now, scope) : undefined
    return result.then((r) => this.fromResult(call, r, clientKey, source), failed)
  }

  /** The decision from an admit: one per limit, the decisive one carrying them all when there are several. */
  private fromResult(call: StoreCall, result: StoreResult, clientKey: string, source: DecisionSource): Decision {
    if (source === 'store' && this.remote) {
      const r = this.resilience
      if (r.degraded) r.answered(call.storeKey)
      const local = r.mirrorResult(call, result)
      if (local !== undefined) {
        // Right after an outage the fallback's admissions count too: it refused what the store admitted.
        result = local
        source = 'fallback'
      }
    }
    const decision = decisionOf(this.algorithm, call, result, clientKey, source)
    if (this.keepCalls && decision.allowed && (source === 'store' || source === 'fallback')) this.ledger.keep(decision, call)
    return this.host.finish(decision)
  }

  handOver(): void {}

  forget(): void {}
}
