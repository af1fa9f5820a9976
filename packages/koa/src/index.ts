import { Limiter, type LimiterOptions } from '@tollgate/core'
import { type AdapterHooks, adapterFunction, createGate, type Decision, isThenable, type ResponseIO } from '@tollgate/core/adapter'
import type { Context, Next } from 'koa'

// The public API of @tollgate/core, so an app imports from one package.
export * from '@tollgate/core'

declare module 'koa' {
  interface DefaultState {
    /** The decision of the last Tollgate limit that ran on this request. */
    rateLimit?: Decision
    /** Every Tollgate decision made on this request, in order (outermost limit first). */
    rateLimits?: Decision[]
  }
}

export interface RateLimitOptions extends LimiterOptions<Context> {
  /** Sends the refusal yourself instead of the default body; headers and `ctx.status` are already set. */
  handler?: (ctx: Context, decision: Decision) => unknown
}

export type RateLimitMiddleware = ((ctx: Context, next: Next) => Promise<unknown>) & {
  /** The limiter behind the middleware, for `consume`, events and tests. */
  readonly limiter: Limiter<Context>
}

const hooks: AdapterHooks<Context> = {
  ip: (ctx) => ctx.ip,
  diagnose(ctx) {
    const app = ctx.app
    const header = app.proxyIpHeader || 'X-Forwarded-For'
    if (app.proxy) {
      // Koa trusts the header from any peer; app.maxIpsCount is its only way to say how many entries
      // its proxies wrote. At 0 (the default) ctx.ip is the leftmost entry, which the client writes
      // whenever a proxy appends to the header (issue 12). A count states the setup: nothing to check.
      if (app.maxIpsCount > 0) return null
      // With one entry the leftmost is the rightmost: maxIpsCount would not change ctx.ip, and honest
      // traffic through one proxy looks like this, so only more entries are worth a warning.
      const value = ctx.get(header)
      if (!value.includes(',')) return undefined
      return `a request carried ${header} with ${value.split(',').length} entries and Koa keys it by the leftmost (app.proxy is on and app.maxIpsCount is 0), which any client can write: a client that varies it is never limited. Set app.maxIpsCount = <number of proxies in front of Koa> (1 behind one proxy).`
    }
    if (ctx.get(header) === '') return undefined
    return `a request carried ${header} but Koa does not trust proxies, so every client behind the proxy shares one limit; when Koa runs behind proxies, set app.proxy = true and app.maxIpsCount = <number of proxies> (1 behind one proxy).`
  },
}

/** Koa's side of the response sequence (core's adapter.ts runs it). */
const io: ResponseIO<Context, Context> = {
  record(ctx, _res, decision) {
    const state = ctx.state
    state.rateLimit = decision
    if (state.rateLimits === undefined) state.rateLimits = [decision]
    else state.rateLimits.push(decision)
    return state.rateLimits
  },
  setHeaders: (ctx, headers) => ctx.set(headers),
  status(ctx, code) {
    ctx.status = code
  },
  send(ctx, rejection) {
    ctx.type = rejection.contentType
    ctx.body = rejection.body
  },
  raw: (ctx) => ctx.res,
}

/**
 * Rate limiting middleware for Koa 2 and 3: `app.use(rateLimit({ max: 10 }))`, or on one
 * @koa/router route. Sets the RateLimit headers, exposes the decision as `ctx.state.rateLimit`, and
 * answers 429 (without calling `next`) when over.
 */
export function rateLimit(options?: RateLimitOptions): RateLimitMiddleware {
  const limiter = new Limiter<Context>(options, hooks, ['handler'])
  const handler = adapterFunction<NonNullable<RateLimitOptions['handler']>>('handler', options?.handler)
  const gate = createGate<Context, Context, undefined>(limiter, io, handler && ((ctx, _res, decision) => handler(ctx, decision)))

  const middleware = async (ctx: Context, next: Next): Promise<unknown> => {
    const go = gate(ctx, ctx, undefined)
    if (isThenable(go) ? await go : go) return next()
  }
  return Object.assign(middleware, { limiter })
}

/**
 * Limits a controller method whose first argument is Koa's `ctx` (standard TC39 decorator). The
 * method body runs only when the request is allowed; otherwise the refusal is sent as the middleware
 * sends it and the method resolves to undefined instead of running.
 */
export function RateLimit(options?: RateLimitOptions) {
  const middleware = rateLimit(options)
  // The limit may wait for its store, so the method becomes async (Koa awaits middleware anyway).
  return function decorate<This, Args extends [Context, ...unknown[]], Result>(
    method: (this: This, ...args: Args) => Result,
    _context: ClassMethodDecoratorContext<This, (this: This, ...args: Args) => Result>,
  ) {
    return async function limited(this: This, ...args: Args) {
      let result: unknown
      await middleware(args[0], async () => {
        result = await method.apply(this, args)
      })
      return result
    } as (this: This, ...args: Args) => Result
  }
}
