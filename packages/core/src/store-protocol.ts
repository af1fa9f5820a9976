/**
 * The store protocol: what a limiter hands a `Store`, what the store answers, and the limits a call
 * carries. Apart from the application's vocabulary (types.ts, which re-exports all of it) so that a
 * store author finds the protocol in one file. It imports nothing, so types.ts may re-export it
 * without forming a cycle.
 */

/** A value now, or later: the memory store answers synchronously so the hot path allocates no promise. */
export type MaybePromise<T> = T | Promise<T>

export function isThenable<T>(value: MaybePromise<T>): value is Promise<T> {
  return typeof (value as Promise<T> | undefined)?.then === 'function'
}

/**
 * The counting algorithms, one file each under algorithms/. Each has a memory twin and a Lua twin
 * with the same arithmetic, so both stores give the same decisions for the same requests.
 */
export type AlgorithmName = 'fixed-window' | 'sliding-window' | 'gcra' | 'sliding-log' | 'concurrency'

/** One limit, with its header fragments rendered once. */
export interface Policy {
  /** Policy name used in the `RateLimit`/`RateLimit-Policy` fields, e.g. `"10-per-1s"`, or `"3-concurrent"` for a concurrency limit. */
  readonly name: string
  /** Requests (cost units) allowed per window. */
  readonly limit: number
  /** Window length in ms; for a concurrency limit, the longest a request may hold its slot. */
  readonly windowMs: number
  /**
   * What the limit counts, when not requests per window: `"concurrent-requests"` for a concurrency
   * limit (algorithm "concurrency"), the quota unit of the draft-8 `RateLimit-Policy` field (`qu`).
   */
  readonly quotaUnit?: 'concurrent-requests'
}

/** One limit of a limiter, normalised once at construction. */
export interface LimitSpec {
  /** Units admitted per window. */
  readonly max: number
  /** Window length in ms. */
  readonly windowMs: number
  /** GCRA only: units that may arrive at once (the bucket size); `max` for the other algorithms. */
  readonly burst: number
  /** Used in store keys when a limiter has several limits, e.g. "1s". */
  readonly label: string
  /** The label is part of the keys even when the limit is alone: its window comes from a `window` function. */
  readonly keyed?: boolean
  readonly policy: Policy
}

/**
 * One atomic check-and-update, the store protocol's unit: every limit admits the request and then
 * all count it, or none does. The time is the limiter's clock, never the store's, so memory and
 * Redis agree exactly and tests can inject time (processes sharing a Redis should keep their clocks
 * in sync; skew shifts window edges by the skew, never more).
 */
export interface StoreCall {
  readonly algorithm: AlgorithmName
  /**
   * `<prefix>{<client key>}`, or `<prefix>{<tag>}` with the `hashTag` option: the braces are a Redis
   * Cluster hash tag (see keys.ts), which every key of the call shares.
   */
  readonly storeKey: string
  readonly limits: readonly LimitSpec[]
  /**
   * Set when limits have keys of their own (`limits[i].key`): the key stem of each limit, in limit
   * order, which the algorithms use instead of deriving it from `storeKey` (keys.ts, stem).
   */
  readonly stems?: readonly string[]
  /** With `stems`: the client key of each limit, as stored, which its decision reports. */
  readonly keys?: readonly string[]
  /** Units this request uses; 0 reads without counting (`peek`). */
  readonly cost: number
  /** Epoch ms from the limiter's clock. */
  readonly now: number
  /**
   * Unique per call: names the sliding-log entries this call adds, so a refund removes exactly them, and
   * the Redis store's record of the call, so an admit or a refund sent twice counts once. Its scripts'
   * replies carry it back, so a reply of another call is never taken for this one's.
   */
  readonly id: string
}

/**
 * A store's answer to `admit`. `values` holds two numbers per limit, in limit order; their meaning is
 * the algorithm's own and is documented, with the code that fills and reads them, in its file under
 * algorithms/.
 */
export interface StoreResult {
  /** True when every limit admitted the call, and so every limit counted it. */
  allowed: boolean
  values: number[]
}

/** What a process asks for: a slice of `asked` units of `limit` for the key stem, at `now`. */
export interface LeaseRequest {
  readonly algorithm: 'fixed-window' | 'gcra'
  /** `<prefix>{<client key>}`, as the algorithm's keys start. */
  readonly stem: string
  readonly limit: LimitSpec
  readonly now: number
  readonly asked: number
  /** The largest fraction of what is left one grant may take, before it is split between lessees. */
  readonly maxShare: number
  /** Units this process was granted under its current marker and still counts as held (0: no marker yet). */
  readonly held: number
  /**
   * Fixed window: units admitted without Redis in this window (by the fallback during an outage), added
   * to the count before anything is granted. GCRA: unspent units of a lapsed slice, given back first.
   */
  readonly adjust: number
  /** This process's lessee id. */
  readonly owner: string
}

/** Redis's answer to a LeaseRequest. */
export interface LeaseGrant {
  /** Units granted (0 when nothing is left). */
  granted: number
  /** Units left in Redis after the grant, for every process. */
  left: number
  /** Processes holding a lease on the key, this one included. */
  lessees: number
  /** The process's marker was gone while it held a slice: Redis lost the key's count. Nothing was granted. */
  restarted: boolean
  /** GCRA: ms until one more unit fits, when nothing was granted. */
  waitMs: number
}

/**
 * Where counts live. One protocol serves every algorithm: `admit`, `refund` and `forget` are
 * required, and a limiter checks at construction that its store has them. `increment` is an optional
 * fast path for the default single-limit fixed window (one INCRBY, batched and merged in Redis).
 * Third-party stores: see docs/guides/writing-a-store.md; @tollgate/core/testing runs the contract suite.
 */
export interface Store {
  /** True when counts live in this process: no deadline, no failure policy, no over-limit cache. */
  readonly local: boolean
  /**
   * Optional: true when the keys of one call must share a Redis Cluster hash slot (a Cluster client),
   * false when they need not. A limiter with per-limit keys and no `hashTag` refuses a store that says
   * true at construction; a store that does not say is checked by its first call that spans slots.
   */
  readonly cluster?: boolean
  /** Checks every limit of the call, then counts it in all of them or in none, atomically. */
  admit(call: StoreCall): MaybePromise<StoreResult>
  /** Undoes an admitted call, only within the call's own windows and never below zero. */
  refund(call: StoreCall): MaybePromise<void>
  /** Deletes everything the call's client has for the call's limits (in the current window, for windows). */
  forget(call: StoreCall): MaybePromise<void>
  /**
   * Optional, for `limiter.settle` and the `actualCost` option: moves an admitted call's count from its
   * estimate (`call.cost`) to `actualCost`, atomically, in each limit's window of the call (`call.now`),
   * if `now` (the settle's time) still lies in it and no later window has a count: lower gives the
   * difference back (never below zero), higher adds it even past the limit. A store whose client may
   * send a call twice should settle it once per `call.id`, as RedisStore does. `call.id` is the admit's
   * own where the algorithm refunds by call id (the sliding log names its entries by it). A limiter whose store lacks it refuses `actualCost`
   * at construction and fails `settle`; a store written before it keeps working otherwise.
   */
  settle?(call: StoreCall, actualCost: number, now: number): MaybePromise<void>
  /**
   * Optional fast path of the single-limit fixed window: adds `cost` to `<key>:<window index>` and
   * returns the count after it (refused requests count too, so a client over the limit stays over it
   * for the rest of the window). Must agree with `admit` for algorithm "fixed-window": the same keys.
   */
  increment?(key: string, cost: number, windowMs: number, now: number): MaybePromise<number>
  /**
   * Optional, for a store in this process (`local`): the count `increment` adds to, as a mutable cell,
   * for the fixed window containing `now`. A limiter keeps its clients' cells for that window and adds
   * to them itself, so a request costs one lookup in its own map. The store changes a cell only in
   * place (a reset sets it to 0), and stops using it when the window ends, as the limiter does.
   */
  cell?(key: string, windowMs: number, now: number): { n: number }
  /**
   * Optional: the failure domain of a store key (a Redis Cluster node), so that a failure opens the
   * circuit of that node only and clients on the others keep their store decisions. Without it the
   * store is one domain.
   */
  nodeOf?(storeKey: string): string
  /**
   * Optional, for `blockDuration`: the end (epoch ms) of the block on `key`, 0 when none. A store
   * without `blockedUntil` and `block` keeps blocks in the limiter's process only.
   */
  blockedUntil?(key: string, now: number): MaybePromise<number>
  /** Blocks `key` until `until` (epoch ms); the block is a key of its own with a TTL to match. */
  block?(key: string, until: number, now: number): MaybePromise<void>
  /**
   * Ends the block on `key` now (the limiter's `reset`). Optional so that a store written before it
   * keeps working, but a store with `block` should have it: without it `reset` forgets the counts
   * while the block keeps refusing the client until its end (the limiter warns once at construction).
   */
  unblock?(key: string): MaybePromise<void>
  /**
   * Optional, for the `lease` option on a remote store: grants a slice of the key's remaining quota in
   * one atomic call, counted into the key (algorithms/leases.ts). A limiter with `lease` refuses a
   * remote store without it at construction.
   */
  lease?(request: LeaseRequest): Promise<LeaseGrant>
  /** Optional, with `lease`: gives back `unspent` units of the process's slice and ends its lease on the key. */
  endLease?(request: LeaseRequest, unspent: number): Promise<void>
}
