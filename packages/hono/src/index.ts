import { Limiter, type LimiterOptions } from '@tollgate/core'
import {
  type AdapterHooks,
  adapterFunction,
  type Decision,
  fetchGate,
  forwardedIp,
  invalidOption,
  runtimeIp,
  withHeaders,
} from '@tollgate/core/adapter'
import type { Context, Env, MiddlewareHandler } from 'hono'

// Core's main entry is what an app uses (the stores, the error and its codes, the limiter behind the
// middleware, the types its options and decisions are made of), so all of it is re-exported and an app
// imports from this package alone. Bundlers drop what an app does not use (RedisStore among it).
export * from '@tollgate/core'

/** What the middleware puts on the context: `c.get('rateLimit')`, `c.get('rateLimits')`. */
export type RateLimitVariables = {
  /** The decision of the last Tollgate limit that ran on this request. */
  rateLimit: Decision
  /** Every Tollgate decision made on this request, in order (outermost limit first). */
  rateLimits: Decision[]
}

declare module 'hono' {
  interface ContextVariableMap extends RateLimitVariables {}
}

/** The connection info helper of Hono's runtime adapters (`getConnInfo` of hono/bun, hono/deno...). */
export type GetConnInfo = (c: Context) => { remote: { address?: string } }

// biome-ignore lint/suspicious/noExplicitAny: Hono's own default Env, so a middleware fits any app
export interface RateLimitOptions<E extends Env = any> extends LimiterOptions<Context<E>> {
  /**
   * Hono's connection info helper for the runtime: `getConnInfo` from 'hono/bun', 'hono/deno',
   * 'hono/cloudflare-workers' or '@hono/node-server/conninfo'. Its remote address is the client IP.
   * @default the runtime's, read without it: Bun's server, Deno's info, Node's socket under
   * @hono/node-server, CF-Connecting-IP on Cloudflare Workers
   */
  getConnInfo?: GetConnInfo
  /**
   * The proxies in front of the app that append the address they saw to X-Forwarded-For: the client IP
   * is the entry this many from the end (the one the nearest proxy you trust wrote; a client can write
   * the entries before it). 0 ignores the header. @default 0
   */
  trustProxy?: number
}

// biome-ignore lint/suspicious/noExplicitAny: as RateLimitOptions
export type RateLimitMiddleware<E extends Env = any> = MiddlewareHandler<E> & {
  /** The limiter behind the middleware, for `consume`, events and tests. */
  readonly limiter: Limiter<Context<E>>
}

const NO_IP_ADVICE =
  "@tollgate/hono reads the client IP that Bun, Deno, @hono/node-server and Cloudflare Workers give; elsewhere pass getConnInfo from Hono's adapter for the runtime, key: (c) => … or, behind proxies that append to X-Forwarded-For, trustProxy: <number of proxies>."

const UNTRUSTED_FORWARDING =
  'a request carried X-Forwarded-For but trustProxy is not set, so every client behind the proxy shares one limit; set trustProxy: <number of proxies in front of the app> (1 behind one proxy).'

/** Keeps a decision on the context; returns every decision made on the request so far. */
function record(c: Context, decision: Decision): Decision[] {
  const all = c.get('rateLimits')
  c.set('rateLimit', decision)
  if (all !== undefined) {
    all.push(decision)
    return all
  }
  const first = [decision]
  c.set('rateLimits', first)
  return first
}

/**
 * Rate limiting middleware for Hono, on every runtime Hono runs on: `app.use(rateLimit({ max: 10 }))`,
 * or on one route, `app.post('/login', rateLimit({ max: 5, window: '1m' }), login)`. Sets the RateLimit
 * fields, puts the decision on the context (`c.get('rateLimit')`), and answers 429 over the limit with
 * Retry-After and a problem-details body, as Tollgate's other adapters do.
 */
// biome-ignore lint/suspicious/noExplicitAny: as RateLimitOptions
export function rateLimit<E extends Env = any>(options?: RateLimitOptions<E>): RateLimitMiddleware<E> {
  const connInfo = adapterFunction<GetConnInfo>('getConnInfo', options?.getConnInfo)
  const hops = options?.trustProxy ?? 0
  if (!Number.isSafeInteger(hops) || hops < 0) throw invalidOption('trustProxy', 'a whole number of proxies ≥ 0', hops)
  const hooks: AdapterHooks<Context<E>> = {
    ip(c) {
      const forwarded = hops > 0 ? forwardedIp(c.req.raw, hops) : undefined
      if (forwarded !== undefined) return forwarded
      return connInfo !== undefined ? connInfo(c).remote.address : runtimeIp(c.req.raw, c.env)
    },
    noIpAdvice: NO_IP_ADVICE,
    ...(hops === 0 && { diagnose: (c) => (c.req.raw.headers.has('x-forwarded-for') ? UNTRUSTED_FORWARDING : undefined) }),
  }
  const limiter = new Limiter<Context<E>>(options, hooks, ['getConnInfo', 'trustProxy'])
  const gate = fetchGate<Context<E>>(limiter, record, (c) => c.req.raw.signal)

  const middleware: MiddlewareHandler<E> = async (c, next) => {
    const reply = await gate(c)
    if (reply.response !== undefined) return reply.response
    await next()
    // Hono has answered by now (its onError included): the fields go on the response as it stands.
    const response = withHeaders(c.res, reply.headers)
    if (response !== c.res) c.res = response
    reply.complete(c.error === undefined ? c.res : 500)
  }
  return Object.assign(middleware, { limiter })
}

export { type AdaptiveConcurrencyMiddleware, type AdaptiveConcurrencyOptions, adaptiveConcurrency, type Priority } from './adaptive'
