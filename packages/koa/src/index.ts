import { Limiter, type LimiterOptions } from '@tollgate/core'
import {
  type AdapterHooks,
  adapterFunction,
  createGate,
  type Decision,
  isObject,
  isThenable,
  type MethodDecorator,
  methodDecorator,
  missingRequest,
  type ResponseIO,
  recordDecision,
} from '@tollgate/core/adapter'
import type { Context, Next } from 'koa'

// Core's main entry is what an app uses (the stores, the error and its codes, the limiter behind the
// middleware, the types its options and decisions are made of), so all of it is re-exported and an app
// imports from this package alone. A store author imports @tollgate/core/store, an adapter author
// @tollgate/core/adapter.
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
      // whenever a proxy appends to the header. A count states the setup: nothing to check.
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

const DONE: Promise<undefined> = Promise.resolve(undefined)

/** Koa's side of the response sequence (core's adapter.ts runs it). */
const io: ResponseIO<Context, Context> = {
  record: (ctx, _res, decision) => recordDecision(ctx.state, decision),
  // Node's setHeader directly, as Koa's ctx.set ends up calling it: no delegate and no type check per
  // field. A context with no Node response under it (a test double) gets ctx.set.
  setHeaders(ctx, headers) {
    const res = ctx.res as Context['res'] | undefined
    if (res === undefined) return void ctx.set(headers)
    if (res.headersSent) return
    for (const name in headers) res.setHeader(name, headers[name]!)
  },
  status(ctx, code) {
    ctx.status = code
  },
  send(ctx, rejection) {
    ctx.type = rejection.contentType
    ctx.body = rejection.bytes
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

  // Not an async function: a decision made synchronously passes straight to next(), with no promise
  // of its own and no extra microtask hops (Koa's compose accepts any promise, or none).
  const middleware = (ctx: Context, next: Next): Promise<unknown> => {
    const go = gate(ctx, ctx, undefined)
    if (isThenable(go)) return go.then((ok) => (ok ? next() : undefined))
    return go ? next() : DONE
  }
  return Object.assign(middleware, { limiter })
}

/** A Koa context: its own `state`, and Koa's `get`/`set` of headers (a Koa request or response has no `state`). */
const isContext = (x: unknown): x is Context => isObject(x) && isObject(x.state) && isObject(x.app) && typeof x.set === 'function'

/** Koa's ctx among a method's arguments: `ctx` itself, or a Koa request or response (`ctx.request`, routing-controllers' @Req()). */
function contextOf(args: readonly unknown[]): Context | undefined {
  for (const arg of args) {
    if (isContext(arg)) return arg
    if (isObject(arg) && isContext(arg.ctx)) return arg.ctx
  }
  return undefined
}

/**
 * Limits a controller method (standard TC39 or legacy `experimentalDecorators` decorator). It finds
 * Koa's `ctx` among the method's arguments (usually the first; a Koa request or response leads to it
 * too). The method body runs only when the request is allowed; otherwise the refusal is sent as the
 * middleware sends it and the method resolves to `ctx` instead of running (routing-controllers then
 * writes nothing more). The decorated method returns a promise. A call without a ctx fails with
 * TG_DECORATOR_NO_REQUEST.
 */
export function RateLimit(options?: RateLimitOptions): MethodDecorator {
  const middleware = rateLimit(options)
  // The limit may wait for its store, so the method becomes async (Koa awaits middleware anyway).
  return methodDecorator(
    (method, label) =>
      async function limited(this: unknown, ...args: unknown[]) {
        const ctx = contextOf(args)
        if (ctx === undefined) {
          throw missingRequest(
            label(this),
            args,
            'Koa context (ctx)',
            "give it Koa's ctx as a parameter (the first, or @Ctx() in routing-controllers).",
          )
        }
        let result: unknown = ctx
        await middleware(ctx, async () => {
          result = await method.apply(this, args)
        })
        return result
      },
  )
}
export { type AdaptiveConcurrencyMiddleware, type AdaptiveConcurrencyOptions, adaptiveConcurrency, type Priority } from './adaptive'
