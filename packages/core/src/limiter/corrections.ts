import { describeValue, TollgateError } from '../errors'
import { isCount } from '../options/checks'
import type { Decision, Store } from '../types'
import type { RefundLedger } from './refund-ledger'
import type { Telemetry } from './reporting'

/*
 * A decision corrected after the response: a refund (the skip options, `release` of a concurrency slot,
 * a manual `refund`) or a settle to the actual cost (`actualCost`, `settle`). Each goes to the store that
 * counted the decision (the configured one, or the fallback during an outage), once (refund-ledger.ts);
 * a store failure is a `storeError` event, never a thrown error in a response's end.
 */
export class Corrections {
  constructor(
    private readonly ledger: RefundLedger,
    private readonly store: Store,
    /** The fallback store, made when first asked for (resilience.ts). */
    private readonly fallback: () => Store,
    private readonly telemetry: Telemetry,
    private readonly clock: () => number,
    /** Drops the refusals this process keeps of a client whose count may fall back under the limit. */
    private readonly lowered: (clientKey: string) => void,
    private readonly emit: (event: string, value?: unknown) => void,
    /** The `lease` option is set: a refund or a settle asked for is refused (notLeased). */
    private readonly leased: boolean,
  ) {}

  /** `limiter.refund`: refused with `lease`, else `refund`. */
  refundAsked(decision: Decision): Promise<void> {
    return this.leased ? Promise.reject(notLeased('refund')) : this.refund(decision)
  }

  /** `limiter.settle`: its arguments checked, refused with `lease` or a store without `settle()`, else `settle`. */
  settleAsked(decision: Decision, actualCost: number): Promise<void> {
    if (this.leased) return Promise.reject(notLeased('settle'))
    if (typeof this.store.settle !== 'function') {
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

  /** Undoes an admitted decision of this limiter, in the store that counted it, once (RefundLedger). */
  async refund(decision: Decision): Promise<void> {
    if (!counted(decision)) return
    const call = this.ledger.take(decision)
    if (call === undefined) return
    this.lowered(decision.key)
    try {
      await (decision.source === 'fallback'
        ? this.fallback().refund(call)
        : this.telemetry.timed('refund', call.storeKey, () => this.store.refund(call)))
    } catch (error) {
      this.emit('storeError', error)
    }
  }

  /**
   * Moves an admitted decision of this limiter from its estimate to `actual` units, in the store that
   * counted it and in the decision's own windows (Store.settle), once (RefundLedger). The settle's time
   * is now: a decision whose window has ended is left as it was.
   */
  async settle(decision: Decision, actual: number): Promise<void> {
    if (!counted(decision)) return
    const call = this.ledger.settle(decision, actual)
    if (call === undefined || call.cost === actual) return
    if (actual < call.cost) this.lowered(decision.key)
    const now = this.clock()
    try {
      await (decision.source === 'fallback'
        ? this.fallback().settle!(call, actual, now)
        : this.telemetry.timed('settle', call.storeKey, () => this.store.settle!(call, actual, now)))
    } catch (error) {
      this.emit('storeError', error)
    }
  }
}

/** An admitted decision a store counted: the only kind a refund or a settle moves. */
function counted(decision: Decision): boolean {
  return decision.allowed && decision.shadowed !== true && (decision.source === 'store' || decision.source === 'fallback')
}

/**
 * A refund or a settle on a limiter with `lease`: the units were granted from a count other processes
 * lease from, and moving it would change what their slices stand for. Refused, as the options that
 * refund or settle after the response (skip*Requests, actualCost) are refused with `lease` at construction.
 */
function notLeased(call: 'refund' | 'settle'): TollgateError {
  return new TollgateError(
    `limiter.${call}: not with the "lease" option: a leased decision's units were granted from a count other processes lease from, ` +
      `and a ${call} would move it; leave out "lease" to ${call} decisions`,
    'TG_INVALID_OPTION',
  )
}
