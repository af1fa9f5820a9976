import { REFUSAL_TRUST_MS } from '../../algorithms/lease-slice'

/**
 * The over-limit cache of the fast path on a remote store: clients already over the limit in the
 * current fixed window, with the count the store last returned, trusted for REFUSAL_TRUST_MS. Keyed by
 * client key, not store key: the prefix is the limiter's own, so the two are one to one, and a flood of
 * refusals then never builds a store key string.
 */
export class OverLimit {
  private readonly counts = new Map<string, { count: number; until: number }>()
  /** The window index the verdicts were made in. */
  private index = -1

  /**
   * The count last seen over the limit for `clientKey` in window `index`, if any and still trusted at
   * `now`. A new window voids every verdict.
   */
  known(clientKey: string, index: number, now: number): number | undefined {
    if (index !== this.index) {
      if (this.counts.size > 0) this.counts.clear()
      this.index = index
    }
    const seen = this.counts.get(clientKey)
    if (seen === undefined) return undefined
    if (now < seen.until) return seen.count
    this.counts.delete(clientKey)
    return undefined
  }

  /** Keeps a verdict made at `now`, only for the window it was made in: a reply can arrive after the edge. */
  remember(clientKey: string, count: number, index: number, now: number): void {
    if (index === this.index) this.counts.set(clientKey, { count, until: now + REFUSAL_TRUST_MS })
  }

  /** The client's count may be under the limit again (a refund, a reset). */
  forget(clientKey: string): void {
    this.counts.delete(clientKey)
  }
}
