import type { Decision, StoreCall } from '../types'
import type { CallParts } from './call-parts'

/**
 * What a refund undoes, once: the store call behind each admitted decision that keeps one (with the
 * refund options, and always for an algorithm that refunds by call id, as the sliding log removes the
 * entries its call id names), and the decisions already refunded, so that a second refund of one
 * changes nothing. Held weakly: a decision nobody refunds takes its call with it.
 */
export class RefundLedger {
  private readonly calls = new WeakMap<Decision, StoreCall>()
  private readonly refunded = new WeakSet<Decision>()

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
}
