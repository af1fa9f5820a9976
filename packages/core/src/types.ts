/**
 * Tollgate's vocabulary: the types every part shares. It imports only the store protocol
 * (store-protocol.ts), which imports nothing, so any file may import it without forming a cycle.
 */

import type { Policy } from './store-protocol'

export {
  type AlgorithmName,
  isThenable,
  type LeaseGrant,
  type LeaseRequest,
  type LimitSpec,
  type MaybePromise,
  type Policy,
  type Store,
  type StoreCall,
  type StoreResult,
} from './store-protocol'

/** Header shapes of the IETF httpapi RateLimit drafts. */
export type HeaderStyle = 'draft-6' | 'draft-7' | 'draft-8'

/** What a limiter does when its store fails or misses its deadline. */
export type StoreErrorPolicy = 'fallback' | 'allow' | 'deny'

/** Where a decision's count came from. */
export type DecisionSource =
  /** The store's atomic increment. */
  | 'store'
  /** The over-limit cache: the client was already over the limit in this window, no store call. */
  | 'cache'
  /** The store failed; a local in-memory limiter decided (`onStoreError: "fallback"`). */
  | 'fallback'
  /** The store failed; the request was let through uncounted (`onStoreError: "allow"`). */
  | 'allow'
  /** The store failed; the request was refused (`onStoreError: "deny"`). */
  | 'deny'
  /** The client is on the `denyList`: refused (403), counted nowhere. */
  | 'denyList'

/** The outcome of one request against one limit. */
export interface Decision {
  /** True when the request is within the limit. */
  allowed: boolean
  /** The limit that applied (`max`). */
  limit: number
  /** Units left in this window after this request; 0 when refused. */
  remaining: number
  /** The window's count after this request, as the store returned it (a lower bound when `source` is "cache"). */
  count: number
  /**
   * When the window ends and the count starts again, in epoch ms. For a concurrency limit, whose slots
   * free whenever requests end, when to look again: a second on, or sooner when the oldest slot expires.
   */
  resetAt: number
  /** How long to wait before a retry can succeed, in ms; 0 when allowed. */
  retryAfterMs: number
  /** Clock time at which the decision was made, in epoch ms. */
  at: number
  /** The client key the request was counted under (the client IP, grouped, or your `key()`). */
  key: string
  /** The limit this decision is about. */
  policy: Policy
  /** Where the count came from. */
  source: DecisionSource
  /** Units this request used (`cost`). */
  cost: number
  /** With several limits (`limits` option): the decision of each, in order; this one is the decisive. */
  limits?: Decision[]
  /** Shadow mode: the limit refused the request, but it was let through (`allowed` is true). */
  shadowed?: boolean
  /** The client is on the `denyList`: refused with `denyStatusCode` (403), no quota headers, counted nowhere. */
  denied?: boolean
}

/** Where request-time problems are reported. Each distinct problem is logged once, not per request. */
export interface Logger {
  warn(message: string): void
  error(message: string, error?: unknown): void
}

/** Attribute values of Tollgate's metrics: a few bounded strings, never a client key. */
export type MetricAttributes = Record<string, string>

/**
 * The part of an OpenTelemetry `MeterProvider` (`@opentelemetry/api`) Tollgate uses, written out here so
 * the API stays an optional peer dependency: a `MeterProvider` of the OpenTelemetry SDK fits it.
 */
export interface MeterProviderLike {
  getMeter(name: string, version?: string): MeterLike
}

/** The part of an OpenTelemetry `Meter` Tollgate uses. */
export interface MeterLike {
  createCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): {
    add(value: number, attributes?: MetricAttributes): void
  }
  createHistogram(
    name: string,
    options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } },
  ): {
    record(value: number, attributes?: MetricAttributes): void
  }
  createObservableGauge(
    name: string,
    options?: { description?: string; unit?: string },
  ): {
    addCallback(callback: (result: { observe(value: number, attributes?: MetricAttributes): void }) => void): void
    removeCallback(callback: (result: { observe(value: number, attributes?: MetricAttributes): void }) => void): void
  }
}

/** What an adapter tells the core about its framework's requests. */
export interface AdapterHooks<Req> {
  /** The client IP as the framework resolved it (honouring its trust-proxy setting). */
  ip(req: Req): string | undefined
  /**
   * A misconfiguration visible only at request time, e.g. a proxy header the framework does not trust:
   * a message (warned once, then no more checks), `undefined` (nothing seen yet, ask again), or `null`
   * (the setup is known to be fine: stop asking, so healthy servers pay nothing per request).
   */
  diagnose?(req: Req): string | null | undefined
  /**
   * What to do about a request without a client IP, in the warning logged at the first one: the
   * adapter's own settings. @default "Behind a proxy, set the framework's trust-proxy setting; or pass a key() option."
   */
  readonly noIpAdvice?: string
}
