import type { Store } from '@tollgate/core'
import type { StoreCall, StoreResult } from '@tollgate/core/store'

/**
 * A store as a third party writes one: counts in a Map, for the fixed window only (a store that counts
 * fewer algorithms refuses the others, so a limiter set to one of them fails loudly). A sketch: it never
 * drops the counts of ended windows, which a real store would expire.
 */
export class MapStore implements Store {
  readonly local = true
  private readonly counts = new Map<string, number>()
  private readonly blocks = new Map<string, number>()

  /** One counter per client, window length and window: `increment` and `admit` share it. */
  private key(stem: string, windowMs: number, now: number): string {
    return `${stem}:${windowMs}:${Math.floor(now / windowMs)}`
  }

  private keys(call: StoreCall): string[] {
    if (call.algorithm !== 'fixed-window') throw new Error(`MapStore counts the fixed window only, not ${call.algorithm}`)
    return call.limits.map((limit) => this.key(call.storeKey, limit.windowMs, call.now))
  }

  /** All limits or none: the numbers per limit are [count before, count after]. */
  admit(call: StoreCall): StoreResult {
    const keys = this.keys(call)
    const before = keys.map((key) => this.counts.get(key) ?? 0)
    const allowed = call.limits.every((limit, i) => before[i]! + call.cost <= limit.max)
    const values: number[] = []
    keys.forEach((key, i) => {
      const after = allowed ? before[i]! + call.cost : before[i]!
      if (after !== before[i]) this.counts.set(key, after)
      values.push(before[i]!, after)
    })
    return { allowed, values }
  }

  refund(call: StoreCall): void {
    for (const key of this.keys(call)) this.counts.set(key, Math.max(0, (this.counts.get(key) ?? 0) - call.cost))
  }

  forget(call: StoreCall): void {
    for (const key of this.keys(call)) this.counts.delete(key)
  }

  increment(key: string, cost: number, windowMs: number, now: number): number {
    const k = this.key(key, windowMs, now)
    const count = (this.counts.get(k) ?? 0) + cost
    this.counts.set(k, count)
    return count
  }

  blockedUntil(key: string, now: number): number {
    const until = this.blocks.get(key) ?? 0
    return until > now ? until : 0
  }

  block(key: string, until: number): void {
    this.blocks.set(key, until)
  }

  unblock(key: string): void {
    this.blocks.delete(key)
  }
}
