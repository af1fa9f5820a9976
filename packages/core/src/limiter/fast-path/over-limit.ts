/**
 * The over-limit cache of the fast path on a remote store: clients already over the limit in the
 * current fixed window, with the count the store last returned. Within one fixed window a count only
 * grows, so a client seen over the limit stays over it until the window ends, and its requests are
 * answered without a round trip. Keyed by client key, not store key: the prefix is the limiter's own,
 * so the two are one to one, and a flood of refusals then never builds a store key string.
 */
export class OverLimit {
  private readonly counts = new Map<string, number>()
  /** The window index the verdicts were made in. */
  private index = -1

  /** The count last seen over the limit for `clientKey` in window `index`, if any. A new window voids every verdict. */
  known(clientKey: string, index: number): number | undefined {
    if (index !== this.index) {
      if (this.counts.size > 0) this.counts.clear()
      this.index = index
    }
    return this.counts.get(clientKey)
  }

  /** Keeps a verdict, only for the window it was made in: a reply can arrive after the edge. */
  remember(clientKey: string, count: number, index: number): void {
    if (index === this.index) this.counts.set(clientKey, count)
  }

  /** The client's count may be under the limit again (a refund, a reset). */
  forget(clientKey: string): void {
    this.counts.delete(clientKey)
  }
}
