import {
  type AdapterHooks,
  adapterFunction,
  type Decision,
  type FetchReply,
  fetchGate,
  forwardedIp,
  invalidOption,
  recordDecision,
  runtimeIp,
  withHeaders,
} from '@tollgate/core/adapter'
import { Limiter, type LimiterOptions } from '@tollgate/core/lean'

// Core's lean entry is what an app uses (the stores, the error and its codes, the limiter behind the
// wrapper, `register` and the features, the types its options and decisions are made of), so all of it is
// re-exported and an app imports from this package alone. Its limiter carries only what the app registers,
// and bundlers drop the rest of what it does not use (RedisStore among it).
export * from '@tollgate/core/lean'

/** Options of `withRateLimit` and `rateLimit`: the limiter's, and where a request's client IP comes from. */
export interface RateLimitOptions<R extends Request = Request, Rest extends unknown[] = unknown[]> extends LimiterOptions<R> {
  /**
   * The client IP of a request, when the runtime's is not the one to key by (a platform's header you
   * trust, such as Vercel's `x-real-ip`). It receives what the handler receives.
   * @default the runtime's: Bun.serve's `server.requestIP()`, Deno.serve's `info.remoteAddr`, Node's
   * socket under @hono/node-server, CF-Connecting-IP on Cloudflare Workers; none in a Next.js route handler
   */
  ip?: (request: R, ...rest: Rest) => string | null | undefined
  /**
   * The proxies in front of the app that append the address they saw to X-Forwarded-For: the client IP
   * is the entry this many from the end (the one the nearest proxy you trust wrote; a client can write
   * the entries before it). 0 ignores the header. @default 0
   */
  trustProxy?: number
}

/** What `rateLimit` answers for one request. */
export interface RateLimitResult extends FetchReply {}

/** A limit to apply to requests yourself: `const { response, headers } = await limit(request)`. */
export type RequestRateLimit<R extends Request = Request, Rest extends unknown[] = unknown[]> = ((
  request: R,
  ...rest: Rest
) => Promise<RateLimitResult>) & {
  /** The limiter behind it, for `consume`, events and tests. */
  readonly limiter: Limiter<R>
}

/**
 * A handler wrapped by `withRateLimit`: the handler's own signature, answering 429 over the limit. It
 * takes whatever more the runtime passes (Bun's server, Deno's info) where the handler declares none.
 */
export type RateLimitedHandler<R extends Request, Rest extends unknown[], Out> = ((
  request: R,
  ...rest: [...Rest, ...unknown[]]
) => Promise<Out | Response>) & {
  /** The limiter behind it, for `consume`, events and tests. */
  readonly limiter: Limiter<R>
}

const NO_IP_ADVICE =
  '@tollgate/web reads the client IP that Bun.serve, Deno.serve, @hono/node-server and Cloudflare Workers give; elsewhere (a Next.js route handler) pass key: (request) => …, ip: (request) => … or, behind proxies that append to X-Forwarded-For, trustProxy: <number of proxies>.'

const UNTRUSTED_FORWARDING =
  'a request carried X-Forwarded-For but trustProxy is not set, so every client behind the proxy shares one limit; set trustProxy: <number of proxies in front of the app> (1 behind one proxy), or pass ip: (request) => ….'

/** Where a request's decisions are kept (a Request has nowhere of its own to put them), for limits nested around one handler. */
const decisions = new WeakMap<object, { rateLimit?: Decision; rateLimits?: Decision[] }>()

function record(request: object, decision: Decision): Decision[] {
  let holder = decisions.get(request)
  if (holder === undefined) {
    holder = {}
    decisions.set(request, holder)
  }
  return recordDecision(holder, decision)
}

/**
 * The decision of the last limit that ran on `request` (the one nearest the handler), for a handler
 * wrapped by `withRateLimit` that wants `remaining` or `resetAt`; undefined when none counted it.
 */
export function rateLimitOf(request: Request): Decision | undefined {
  return decisions.get(request)?.rateLimit
}

/**
 * A limit to apply to requests yourself, for code that builds its responses itself: resolves to the
 * decision, the header fields to add to the response, and the refusal to send when over the limit.
 * Rejects with a TollgateError when an option function throws or returns a bad value.
 *
 * ```ts
 * const limit = rateLimit({ max: 10 })
 * const { response, headers } = await limit(request)
 * if (response) return response
 * ```
 */
export function rateLimit<R extends Request = Request, Rest extends unknown[] = unknown[]>(
  options?: RateLimitOptions<R, Rest>,
): RequestRateLimit<R, Rest> {
  const ip = adapterFunction<NonNullable<RateLimitOptions<R, Rest>['ip']>>('ip', options?.ip)
  const hops = options?.trustProxy ?? 0
  if (!Number.isSafeInteger(hops) || hops < 0) throw invalidOption('trustProxy', 'a whole number of proxies ≥ 0', hops)
  // What the handler received besides the request (Bun's server, Deno's info, a Worker's env), for `ip`.
  const rests = new WeakMap<object, Rest>()
  const hooks: AdapterHooks<R> = {
    ip(request) {
      const rest = rests.get(request) ?? ([] as unknown[] as Rest)
      if (ip !== undefined) return ip(request, ...rest) ?? undefined
      return (hops > 0 ? forwardedIp(request, hops) : undefined) ?? runtimeIp(request, rest[0])
    },
    noIpAdvice: NO_IP_ADVICE,
    ...(ip === undefined &&
      hops === 0 && { diagnose: (request) => (request.headers.has('x-forwarded-for') ? UNTRUSTED_FORWARDING : undefined) }),
  }
  const limiter = new Limiter<R>(options, hooks, ['ip', 'trustProxy'])
  const gate = fetchGate<R>(limiter, record, (request) => request.signal)
  const limit = async (request: R, ...rest: Rest): Promise<RateLimitResult> => {
    if (rest.length > 0) rests.set(request, rest)
    return gate(request)
  }
  return Object.assign(limit, { limiter })
}

const isResponse = (x: unknown): x is Response =>
  typeof x === 'object' && x !== null && typeof (x as Response).status === 'number' && typeof (x as Response).headers?.has === 'function'

/**
 * Rate limits a Fetch API handler: a Next.js route handler, `Bun.serve`'s or `Deno.serve`'s fetch, a
 * Worker's `fetch(request, env, ctx)`. The wrapped handler has the same signature; over the limit it
 * answers 429 with Retry-After and a problem-details body without calling the handler, and otherwise
 * adds the RateLimit headers to the handler's response. What the handler throws, or a limit's
 * TollgateError, reaches the runtime as the handler's own error would.
 */
export function withRateLimit<R extends Request, Rest extends unknown[], Out>(
  handler: (request: R, ...rest: Rest) => Out | Promise<Out>,
  options?: RateLimitOptions<R, Rest>,
): RateLimitedHandler<R, Rest, Out> {
  if (typeof handler !== 'function') throw invalidOption('handler', 'a function (request, ...rest) => Response', handler)
  const limit = rateLimit<R, Rest>(options)
  async function limited(this: unknown, request: R, ...args: [...Rest, ...unknown[]]): Promise<Out | Response> {
    const rest = args as unknown as Rest
    const result = await limit(request, ...rest)
    if (result.response !== undefined) return result.response
    let response: Out
    try {
      response = await handler.call(this, request, ...rest)
    } catch (error) {
      result.complete(500)
      throw error
    }
    if (!isResponse(response)) {
      // Bun answers a WebSocket upgrade itself once the handler returns nothing.
      result.complete(101)
      return response
    }
    result.complete(response)
    return withHeaders(response, result.headers)
  }
  return Object.assign(limited, { limiter: limit.limiter })
}

export { type AdaptiveConcurrencyOptions, type AdaptiveHandler, type Priority, withAdaptiveConcurrency } from './adaptive'
