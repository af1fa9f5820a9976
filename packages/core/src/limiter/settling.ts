import { describeValue, TollgateError } from '../errors'
import { isCount } from '../options/checks'
import type { Config } from '../options/parse-options'
import { type Decision, isThenable } from '../types'
import { type Corrections, counted } from './corrections'
import { notLeased } from './not-leased'

/**
 * A decision settled to its actual cost, once it is known (see "Settle" in algorithms/protocol.ts):
 * `limiter.settle`, and the `actualCost` option after each response. The settling feature (features.ts):
 * the lean Limiter refuses both until it is registered.
 */
export class Settling {
  /** The `actualCost` option's failures are logged once. */
  private actualCostWarned = false

  constructor(
    private readonly config: Config<unknown>,
    private readonly corrections: Corrections,
  ) {}

  /** `limiter.settle`: its arguments checked, refused with `lease` or a store without `settle()`, else `settle`. */
  asked(decision: Decision, actualCost: number): Promise<void> {
    if (this.config.lease !== undefined) return Promise.reject(notLeased('settle'))
    if (typeof this.config.store.settle !== 'function') {
      return Promise.reject(
        new TollgateError(
          'limiter.settle: the store has no settle(), so a decision cannot be settled to its actual cost; use a store with settle() (MemoryStore and RedisStore have it)',
          'TG_INVALID_OPTION',
        ),
      )
    }
    if (!isCount(actualCost)) {
      return Promise.reject(
        new TollgateError(
          `limiter.settle: expected actualCost as a whole number ≥ 0, got ${describeValue(actualCost)}`,
          'TG_INVALID_REQUEST_VALUE',
        ),
      )
    }
    return this.settle(decision, actualCost)
  }

  /**
   * Moves an admitted decision of this limiter from its estimate to `actual` units, in the store that
   * counted it and in the decision's own windows (Store.settle), once (RefundLedger). The settle's time
   * is now: a decision whose window has ended is left as it was.
   */
  async settle(decision: Decision, actual: number): Promise<void> {
    if (!counted(decision)) return
    const c = this.corrections
    const call = c.ledger.settle(decision, actual)
    if (call === undefined || call.cost === actual) return
    if (actual < call.cost) c.lowered(decision.key)
    const now = this.config.clock()
    try {
      await (decision.source === 'fallback'
        ? c.fallback().settle!(call, actual, now)
        : c.telemetry.timed('settle', call.storeKey, () => this.config.store.settle!(call, actual, now)))
    } catch (error) {
      c.emit('storeError', error)
    }
  }

  /** After a response: settles the decision to what `actualCost` returns; a failure or a bad value leaves it at its estimate, logged once. */
  afterResponse(req: unknown, res: unknown, decision: Decision): void {
    const actualCost = this.config.actualCost
    if (actualCost === undefined) return
    try {
      const value = actualCost(req, res)
      if (isThenable(value))
        value.then(
          (v) => this.settleTo(decision, v),
          (e) => this.actualCostFailed(`rejected with ${describeFailure(e)}`, e),
        )
      else this.settleTo(decision, value)
    } catch (error) {
      this.actualCostFailed(`threw ${describeFailure(error)}`, error)
    }
  }

  private settleTo(decision: Decision, value: unknown): void {
    if (!isCount(value)) {
      this.actualCostFailed(`returned ${describeValue(value)}, expected a whole number ≥ 0`)
      return
    }
    // Store failures are reported as storeError events by the limiter; nothing else can reject.
    this.settle(decision, value).catch((e) => this.actualCostFailed(`could not settle: ${describeFailure(e)}`, e))
  }

  private actualCostFailed(problem: string, cause?: unknown): void {
    if (this.actualCostWarned) return
    this.actualCostWarned = true
    this.config.logger.error(
      `Tollgate: option "actualCost" ${problem}; such requests keep their estimated cost [TG_INVALID_REQUEST_VALUE]`,
      cause,
    )
  }
}

const describeFailure = (e: unknown): string => (e instanceof Error ? e.message : describeValue(e))
