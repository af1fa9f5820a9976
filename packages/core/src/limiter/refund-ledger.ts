import type { Decision, StoreCall } from '../types'
import type { CallParts } from './call-parts'

/**
 * What a refund or a settle undoes, once: the store call behind each admitted decision that keeps one
 * (with the refund options, and always for an algorithm that refunds by call id, as the sliding log
 * removes the entries its call id names), the decisions already refunded, so that a second refund of
 * one changes nothing, and those already settled, so that a decision settles once. A settled decision's
 * call is kept with its actual cost: a refund after the settle gives back what was finally charged.
 * Held weakly: a decision nobody refunds takes its call with it.
 */
export class RefundLedger {
  private readonly calls = new WeakMap<Decision, StoreCall>()
  private readonly refunded = new WeakSet<Decision>()
  private readonly settled = new WeakSet<Decision>()

  constructor(private readonly parts: CallParts) {}

  /** Keeps `call` as what refunding `decision` undoes. */
  keep(decision: Decision, call: StoreCall): void {
    this.calls.set(decision, call)
  }

  /**
   * The call to undo for `decision`, the first time it is asked for: the one kept, or else rebuilt from
   * the decision (the same keys, limits and time). Undefined when it was refunded already or cannot be rebuilt.
   */
  take(decision: Decision): StoreCall | undefined {
    if (this.refunded.has(decision)) return undefined
    const call = this.calls.get(decision) ?? this.parts.rebuild(decision)
    if (call === undefined) return undefined
    this.refunded.add(decision)
    this.calls.delete(decision)
    return call
  }

  /**
   * The call to settle for `decision` to `actual` units, the first time it is asked for and only if the
   * decision has not been refunded; from then on a refund of it undoes `actual` units.
   */
  settle(decision: Decision, actual: number): StoreCall | undefined {
    if (this.refunded.has(decision) || this.settled.has(decision)) return undefined
    const call = this.calls.get(decision) ?? this.parts.rebuild(decision)
    if (call === undefined) return undefined
    this.settled.add(decision)
    this.calls.set(decision, { ...call, cost: actual })
    return call
  }
}
