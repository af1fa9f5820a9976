import type { Duration } from '../duration'
import type { AlgorithmName, Decision, HeaderStyle, Logger, MaybePromise, MeterProviderLike, Store, StoreErrorPolicy } from '../types'
import type { LeaseOption } from './lease-option'

/** One of several limits checked together (`limits` option). */
export interface LimitOptions<Req = unknown> {
  /** Units allowed per window. */
  max: number
  /** Window length: ms or a duration string such as "1s", "1 hour". */
  window: Duration
  /** GCRA only: how many units may arrive at once. @default max */
  burst?: number
  /** Policy name in the headers. @default "<max>-per-<window>" */
  name?: string
  /**
   * Key of this limit, a function of the request (e.g. `(req) => 'tenant:' + req.user.tenant`), when
   * it counts under another key than the limiter's client key. The request is admitted only if every
   * limit admits it, and then counted under every limit's key, in one atomic store call. On Redis
   * Cluster, give the limiter a `hashTag` too. `consume`, `peek` and `reset` take it as `keys[i]`.
   * @default the limiter's client key (`key`, or the client IP)
   */
  key?: (req: Req) => MaybePromise<string>
}

/** The options every adapter accepts. `Req` is the framework's request (Express `req`, Fastify `request`, Koa `ctx`). */
export interface LimiterOptions<Req = unknown> {
  /**
   * Requests (cost units) allowed per window per client, or a function of the request returning it.
   * @default 10
   */
  max?: number | ((req: Req) => MaybePromise<number>)
  /**
   * Window length: ms, or a duration string such as `"1s"`, `"500ms"`, `"1 minute"`; or a function of
   * the request returning one (per-tier windows). Two windows never share a count: each window of a
   * function has keys of its own. `consume`, `peek` and `reset` outside HTTP use `"1s"` then.
   * With algorithm `"concurrency"`: the longest a request holds its slot (a duration, not a function),
   * so the slots of a process that died mid-request free themselves; `"1m"` by default there.
   * @default "1s"
   */
  window?: Duration | ((req: Req) => MaybePromise<Duration>)
  /**
   * Client key of a request. Defaults to the client IP as the framework resolved it (honouring its
   * trust-proxy setting), with IPv6 grouped by `ipv6Subnet`.
   */
  key?: (req: Req) => MaybePromise<string>
  /**
   * Prefix of every store key. Give each limiter sharing a store its own prefix.
   * @default "tg:"
   */
  prefix?: string
  /**
   * Where counts live. Pass `new RedisStore({ client })` to share limits between processes.
   * @default new MemoryStore()
   */
  store?: Store
  /**
   * Units one request uses, or a function of the request returning it.
   * @default 1
   */
  cost?: number | ((req: Req) => MaybePromise<number>)
  /**
   * Clients never limited: their requests are not counted and get no headers. IPs and CIDR ranges
   * (`"203.0.113.0/24"`, `"2001:db8::/32"`), matched on the client IP as the framework resolved it,
   * or other strings, matched on the client key; or a function of the request returning true.
   */
  allowList?: string[] | ((req: Req) => MaybePromise<boolean>)
  /**
   * Clients always refused, with `denyStatusCode` (403) and a problem-details body, counted nowhere.
   * The same entries as `allowList`; a client on both is denied.
   */
  denyList?: string[] | ((req: Req) => MaybePromise<boolean>)
  /** Status of a request from a client on the `denyList`. @default 403 */
  denyStatusCode?: number
  /**
   * Body of a request from a client on the `denyList`, as `message` is for refusals. Defaults to an
   * RFC 9457 problem-details JSON body.
   */
  denyMessage?: string | Record<string, unknown> | ((req: Req, decision: Decision) => MaybePromise<string | Record<string, unknown>>)
  /** Return true to let a request through without counting it or adding headers. */
  skip?: (req: Req) => MaybePromise<boolean>
  /**
   * Which standard headers to send: the latest IETF draft (`"draft-8"`, structured `RateLimit` and
   * `RateLimit-Policy`), the older `"draft-7"` or `"draft-6"` shapes, or none (`false`).
   * @default "draft-8"
   */
  headers?: boolean | HeaderStyle
  /**
   * On which responses the quota fields (`headers` and `legacyHeaders`) are sent: every limited
   * response, only allowed ones, or only refused ones.
   * @default "all"
   */
  headersOn?: 'all' | 'allowed' | 'refused'
  /**
   * Send `Retry-After` and `Cache-Control: no-store` on refused responses (independent of `headers`).
   * @default true
   */
  refusalHeaders?: boolean
  /**
   * Also send `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (epoch seconds).
   * @default false
   */
  legacyHeaders?: boolean
  /**
   * Status of a refused request.
   * @default 429
   */
  statusCode?: number
  /**
   * Body of a refused request: a string (sent as text/plain), an object (sent as JSON), or a function
   * of the request and decision returning either. Defaults to an RFC 9457 problem-details JSON body.
   */
  message?: string | Record<string, unknown> | ((req: Req, decision: Decision) => MaybePromise<string | Record<string, unknown>>)
  /**
   * IPv6 addresses are grouped by this prefix length, so one host cannot rotate through its own
   * subnet to get fresh quotas; `false` keys on the full address.
   * @default 56
   */
  ipv6Subnet?: number | false
  /**
   * What to do when the store fails or misses its deadline: keep limiting with a local in-memory
   * limiter (`"fallback"`), let requests through (`"allow"`), or refuse them (`"deny"`).
   * @default "fallback"
   */
  onStoreError?: StoreErrorPolicy
  /**
   * Name of the policy in the `RateLimit` headers.
   * @default "<max>-per-<window>", e.g. "10-per-1s"
   */
  name?: string
  /**
   * Where the limiter's OpenTelemetry metrics go (meter `tollgate`, see docs/guides/monitoring.md): an
   * SDK `MeterProvider`. Without it they go to the global MeterProvider of `@opentelemetry/api` when the
   * API is installed and an SDK is registered, and nowhere otherwise.
   * @default the global MeterProvider
   */
  meterProvider?: MeterProviderLike
  /**
   * Counting algorithm: `"fixed-window"` (MULTI/EXEC counters, the cheapest), `"sliding-window"`
   * (previous and current window weighted by overlap), `"gcra"` (a token bucket with one timestamp per
   * client and exact retry times), `"sliding-log"` (exact rolling window, one entry per unit) or
   * `"concurrency"` (at most `max` requests of a client in flight at once: each admitted request holds
   * a slot until its response ends or is cut off, outside HTTP until `limiter.release(decision)`, and
   * at most `window`; refusals carry a short Retry-After). With `"concurrency"`, `blockDuration`,
   * `skipFailedRequests`, `skipSuccessfulRequests` and a `window` function are refused.
   * @default "fixed-window"
   */
  algorithm?: AlgorithmName
  /**
   * Several limits checked at once, atomically, in one round trip, e.g.
   * `[{ max: 10, window: '1s' }, { max: 1000, window: '1h' }]`. A request refused by one limit uses
   * up none of the others. Replaces `max` and `window`.
   */
  limits?: LimitOptions<Req>[]
  /**
   * With limits that have keys of their own (`limits[i].key`): the Redis Cluster hash tag of a
   * request's keys, a function of the request (e.g. `(req) => req.user.tenant`), so one atomic script
   * can touch them all. Keys become `<prefix>{<tag>}:<key>:<window>...`. Required on a Redis Cluster
   * store; a standalone Redis or the memory store needs none. `consume`, `peek` and `reset` take it as
   * `hashTag` in their options.
   */
  hashTag?: (req: Req) => MaybePromise<string>
  /** GCRA only: units that may arrive at once (the bucket size). @default max */
  burst?: number
  /** Refund requests whose response failed (status ≥ 400, or `requestWasSuccessful` false). @default false */
  skipFailedRequests?: boolean
  /** Refund requests whose response succeeded, e.g. to count only failed logins. @default false */
  skipSuccessfulRequests?: boolean
  /**
   * Decides, after the response, whether a request succeeded, for the two options above.
   * Receives the framework's request and response (Express `res`, Fastify `reply`, Koa: the same `ctx`).
   * @default status < 400
   */
  // biome-ignore lint/suspicious/noExplicitAny: the response type is the adapter's (Express res, Fastify reply, Koa ctx)
  requestWasSuccessful?: (req: Req, res: any) => MaybePromise<boolean>
  /**
   * The units a request really used, known once its response has ended (the tokens of an LLM reply, a
   * GraphQL query's actual complexity), e.g. read from a response header or `res.locals`. Receives the
   * framework's request and response (Express `req, res`; Fastify `request, reply`; Koa: `ctx`, twice).
   * The request is admitted with its `cost` as an estimate, then settled to this in its own window
   * (`limiter.settle`): the difference is given back, or charged even past the limit. A function that
   * throws, rejects or returns anything but a whole number ≥ 0 is logged once, and the request keeps its
   * estimate. Needs a store with `settle()` (MemoryStore and RedisStore have it).
   */
  // biome-ignore lint/suspicious/noExplicitAny: the response type is the adapter's (Express res, Fastify reply, Koa ctx)
  actualCost?: (req: Req, res: any) => MaybePromise<number>
  /**
   * Lockout: once a client goes over its limit, refuse it for this long from that first refusal,
   * whatever the window (`Retry-After` and the `RateLimit` reset show the block's end). For the
   * login case: `{ max: 5, window: '1m', blockDuration: '15m', skipSuccessfulRequests: true }`.
   * Prefer it to a longer window when a client that abuses the limit should wait, while clients
   * within it keep the short window's quota.
   */
  blockDuration?: Duration
  /**
   * Shadow mode: count, send headers and emit `limited` events, but never refuse a request. For
   * rolling out a new limit safely.
   * @default false
   */
  shadow?: boolean
  /**
   * Quota leasing, for a hot key on a remote store: each process reserves a slice of the key's
   * remaining quota from Redis in one atomic call and decides from it locally, with no round trip,
   * asking for the next slice before this one runs out. Redis never grants more than is left, so the
   * processes together never admit more than `max`; slices shrink as the quota runs out and as more
   * processes lease the key, down to one unit near the limit. Unspent units go back when a process
   * stops using the key (and at `limiter.close()`), or lapse at the window's end (under-admitting,
   * never over). `remaining` is this process's view: its slice plus what Redis had left at its last
   * grant, an upper bound across processes. `maxShare` (in (0, 1]) is the largest fraction of what is
   * left one grant may take before it is split between lessees. Fixed window and GCRA only; refused with
   * `limits`, a `window` function, `actualCost` and the skip*Requests options; a no-op on the memory
   * store. See docs/guides/leasing.md.
   * @default false
   */
  lease?: LeaseOption
  /** Where request-time problems are logged, once each. @default console */
  logger?: Logger
  /** Clock in epoch ms, for tests. @default Date.now */
  clock?: () => number
}
