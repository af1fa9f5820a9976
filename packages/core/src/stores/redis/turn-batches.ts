import { MAX_BATCH_CALLS } from '../../algorithms'

/**
 * Calls gathered over one event-loop turn, per group (an algorithm, and on a Cluster a client key: what
 * one script call may hold), each group sent as one batch: after the turn (setImmediate, not a
 * microtask: it runs after every request parsed in this I/O turn), or at once when the batch is full
 * (MAX_BATCH_CALLS) or batching is off.
 */
export class TurnBatches<T, B extends { readonly size: number; add(item: T): void }> {
  private pending = new Map<string, B>()
  private flushScheduled = false

  constructor(
    /** A new batch, for its first call. */
    private readonly make: (first: T) => B,
    private readonly send: (batch: B) => void,
    /** Send each call at once, on its own. */
    private readonly unbatched: boolean,
  ) {}

  /** Adds a call to `group`'s batch. */
  add(group: string, item: T): void {
    let batch = this.pending.get(group)
    if (batch === undefined) {
      batch = this.make(item)
      this.pending.set(group, batch)
    }
    batch.add(item)
    if (this.unbatched || batch.size >= MAX_BATCH_CALLS) {
      this.pending.delete(group)
      this.send(batch)
    } else if (!this.flushScheduled) {
      this.flushScheduled = true
      setImmediate(this.flush)
    }
  }

  private readonly flush = (): void => {
    this.flushScheduled = false
    const batches = this.pending
    this.pending = new Map()
    for (const batch of batches.values()) this.send(batch)
  }
}
