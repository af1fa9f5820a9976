import type { Decision, LimitSpec, MaybePromise } from '../../types'
import type { CallScope } from '../call-parts'

/*
 * How a limiter counts, picked once at its construction (counting.ts): the increment path (a single
 * limit of an algorithm that `increments`, on a store with `increment`) or the admit path (one atomic
 * `admit` for every limit). The `lease` option sits in front of either (fast-path/leases.ts). A request
 * asks the path; it never tests which one it is.
 */
export interface CountPath {
  /**
   * The decision for `cost` units of `clientKey`, counted in the configured store (timed) or, `fallback`,
   * in the fallback store. A store that throws, throws here; one that rejects goes to the host's `failed`.
   */
  count(fallback: boolean, clientKey: string, limit: LimitSpec, cost: number, now: number, scope?: CallScope): MaybePromise<Decision>
  /** A refusal this process knows without asking the store, or undefined. */
  known(clientKey: string, limit: LimitSpec, cost: number, now: number): Decision | undefined
  /** The store failed: what this process knows of the client's count goes to the fallback store first. */
  handOver(clientKey: string, now: number): void
  /** Drops what this process remembers of the client's counts (a reset, a refund that may bring it back under). */
  forget(clientKey: string): void
}

/** What a path reports back to (counting.ts). */
export interface PathHost {
  /** The store failed: the decision by the failure policy. */
  failed(error: unknown, clientKey: string, limit: LimitSpec, cost: number, now: number, scope?: CallScope): Decision
  /** Reports a refusal (the `limited` event, shadow mode). */
  finish(decision: Decision): Decision
}
