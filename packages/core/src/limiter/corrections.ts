import type { TollgateError } from '../errors'
import type { Decision, Store } from '../types'
import type { RefundLedger } from './refund-ledger'
import type { Telemetry } from './reporting'

/*
 * A decision corrected after the response: a refund (the skip options, `release` of a concurrency slot,
 * a manual `refund`), or a settle to the actual cost (`actualCost`, `settle`: settling.ts, which uses
 * what this class holds). Each goes to the store that
 * counted the decision (the configured one, or the fallback during an outage), once (refund-ledger.ts);
 * a store failure is a `storeError` event, never a thrown error in a response's end.
 */
export class Corrections {
  constructor(
    readonly ledger: RefundLedger,
    private readonly store: Store,
    /** The fallback store, made when first asked for (resilience.ts). */
    readonly fallback: () => Store,
    readonly telemetry: Telemetry,
    /** Drops the refusals this process keeps of a client whose count may fall back under the limit. */
    readonly lowered: (clientKey: string) => void,
    readonly emit: (event: string, value?: unknown) => void,
    /** With the `lease` option, the refusal of a refund asked for (notLeased, given by the leasing feature). */
    private readonly leased: ((call: 'refund') => TollgateError) | undefined,
  ) {}

  /** `limiter.refund`: refused with `lease`, else `refund`. */
  refundAsked(decision: Decision): Promise<void> {
    return this.leased !== undefined ? Promise.reject(this.leased('refund')) : this.refund(decision)
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
}

/** An admitted decision a store counted: the only kind a refund or a settle moves. */
export function counted(decision: Decision): boolean {
  return decision.allowed && decision.shadowed !== true && (decision.source === 'store' || decision.source === 'fallback')
}
