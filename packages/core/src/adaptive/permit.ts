// What the gate answers a request (gate.ts): a permit to release when the response has ended, or a refusal.

export type Priority = 'critical' | 'normal' | 'sheddable'

/** Classes by rank, the lowest shed first. */
export const PRIORITIES: readonly Priority[] = ['sheddable', 'normal', 'critical']

/** What issued a permit: told once when its request ended. */
export interface Issuer {
  ended(permit: Permit, overloaded: boolean): void
}

/** A request the gate let in: release it once, when its response has ended. */
export class Permit {
  private released = false
  constructor(
    private readonly gate: Issuer,
    readonly priority: Priority,
    readonly startedAt: number,
    /** ms it waited in the queue. */
    readonly waitedMs: number,
  ) {}

  /** `overloaded`: the request ended as overload (timed out, or the service answered 503 itself). */
  release(overloaded = false): void {
    if (this.released) return
    this.released = true
    this.gate.ended(this, overloaded)
  }
}

/** A request the gate refused. */
export interface Shed {
  readonly priority: Priority
  /**
   * `full`: the queue had no room for its class; `timeout`: it waited queueTimeoutMs; `displaced`: a higher class
   * took its place; `shedding`: a higher class was refused within the last interval.
   */
  readonly reason: 'full' | 'timeout' | 'displaced' | 'shedding'
  readonly retryAfterMs: number
}
