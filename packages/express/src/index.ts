import { Limiter, type LimiterOptions } from '@tollgate/core'
import {
  adapterFunction,
  createGate,
  type Decision,
  isObject,
  isThenable,
  type MethodDecorator,
  methodDecorator,
  missingRequest,
  type ResponseIO,
} from '@tollgate/core/adapter'
import type { NextFunction, Request, Response } from 'express'
import { expressIp } from './client-ip'
import { expressRecord } from './decisions'
import { expressVisit } from './visits'

// Core's main entry is what an app uses (the stores, the error and its codes, the limiter behind the
// middleware, the types its options and decisions are made of), so all of it is re-exported and an app
// imports from this package alone. A store author imports @tollgate/core/store, an adapter author
// @tollgate/core/adapter.
export * from '@tollgate/core'

declare global {
  namespace Express {
    interface Request {
      /** The decision of the last Tollgate limit that ran on this request. */
      rateLimit?: Decision
      /** Every Tollgate decision made on this request, in order (global limit first). */
      rateLimits?: Decision[]
    }
  }
}

export interface RateLimitOptions extends LimiterOptions<Request> {
  /** Sends the refusal yourself instead of the default body; the headers and the status (429) are already set. */
  handler?: (req: Request, res: Response, next: NextFunction, decision: Decision) => void
}

export type RateLimitMiddleware = ((req: Request, res: Response, next: NextFunction) => void) & {
  /** The limiter behind the middleware, for `consume`, events and tests. */
  readonly limiter: Limiter<Request>
}

const hooks = {
  // req.ip's own address, without the cost of Express's getter (client-ip.ts).
  ip: (req: Request) => expressIp(req),
  diagnose(req: Request): string | null | undefined {
    const trust = req.app.get('trust proxy')
    // true makes req.ip the leftmost X-Forwarded-For entry, which any client can write, even through
    // a proxy that appends to the header. It is never needed: a hop count or the proxies'
    // addresses say the same for honest traffic, so this is warned at the first request.
    if (trust === true) {
      return `Express "trust proxy" is true, so req.ip is the leftmost X-Forwarded-For entry, which any client can write: a client that varies it is never limited. Trust only your proxies: app.set('trust proxy', <number of proxies>) or their addresses (e.g. 1 behind one proxy, 'loopback' for a proxy on this host).`
    }
    if (trust) return null // specific proxies are trusted: nothing more to check
    if (req.headers['x-forwarded-for'] !== undefined) {
      return `a request carried X-Forwarded-For but Express does not trust proxies, so every client behind the proxy shares one limit; set app.set('trust proxy', <number of proxies>) or their addresses (e.g. 1 behind one proxy).`
    }
    return undefined
  },
}

/** Express's side of the response sequence (core's adapter.ts runs it). */
const io: ResponseIO<Request, Response> = {
  // Read as req.rateLimit and req.rateLimits, kept where adding to a request costs least (decisions.ts).
  record: (req, _res, decision) => expressRecord(req, decision),
  setHeaders(res, headers) {
    for (const name in headers) res.setHeader(name, headers[name]!)
  },
  status: (res, code) => void res.status(code),
  send(res, rejection) {
    res.setHeader('Content-Type', rejection.contentType)
    res.end(rejection.bytes)
  },
  raw: (res) => res,
  // Marked in res.locals, not on the request (visits.ts).
  visit: expressVisit,
}

/**
 * Rate limiting middleware for Express 4 and 5: `app.use(rateLimit({ max: 10 }))`, or on one route.
 * Sets the RateLimit headers, exposes the decision as `req.rateLimit`, and answers 429 when over.
 */
export function rateLimit(options?: RateLimitOptions): RateLimitMiddleware {
  const limiter = new Limiter<Request>(options, hooks, ['handler'])
  const handler = adapterFunction<NonNullable<RateLimitOptions['handler']>>('handler', options?.handler)
  const gate = createGate<Request, Response, NextFunction>(
    limiter,
    io,
    handler && ((req, res, decision, next) => handler(req, res, next, decision)),
  )

  const middleware = (req: Request, res: Response, next: NextFunction) => {
    let go: ReturnType<typeof gate>
    try {
      go = gate(req, res, next)
    } catch (error) {
      return next(error)
    }
    if (isThenable(go)) go.then((ok) => ok && next(), next)
    else if (go) next()
  }
  return Object.assign(middleware, { limiter })
}

/** An Express request: Express links it to its response (`req.res`), and `req.app` is the app its settings come from. */
const isRequest = (x: unknown): x is Request =>
  isObject(x) && typeof x.method === 'string' && isObject(x.headers) && typeof x.app === 'function' && isObject(x.res)
const isResponse = (x: unknown): x is Response => isObject(x) && typeof x.setHeader === 'function' && isRequest(x.req)

/** The request and response among a method's arguments: wherever they are, and either one is enough (Express links them). */
function requestOf(args: readonly unknown[]): Request | undefined {
  for (const arg of args) {
    if (isRequest(arg)) return arg
    if (isResponse(arg)) return arg.req
  }
  return undefined
}

/**
 * Limits a controller method (standard TC39 or legacy `experimentalDecorators` decorator). It finds
 * Express's `req` and `res` among the method's arguments: `(req, res, next)`, or parameters decorated
 * with `@Req()` / `@Res()` anywhere in the list (routing-controllers, NestJS); one of the two is
 * enough. The method body runs only when the request is allowed; otherwise the 429 is sent exactly as
 * the middleware sends it and the call resolves to `res` (routing-controllers then writes nothing more).
 * The decorated method returns a promise. A call without a request fails with TG_DECORATOR_NO_REQUEST.
 */
export function RateLimit(options?: RateLimitOptions): MethodDecorator {
  const middleware = rateLimit(options)
  return methodDecorator(
    (method, label) =>
      function limited(this: unknown, ...args: unknown[]): Promise<unknown> {
        const req = requestOf(args)
        if (req === undefined) return Promise.reject(missingRequest(label(this), args, 'Express request (req) or response (res)', HINT))
        const res = req.res!
        // Plain Express (req, res, next): an error of the limit goes to next, as the middleware's does.
        const next = args[0] === req && typeof args[2] === 'function' ? (args[2] as NextFunction) : undefined
        return new Promise((resolve, reject) => {
          const done = (error?: unknown) => {
            if (error !== undefined && error !== null) {
              if (next !== undefined) return resolve(void next(error))
              return reject(error)
            }
            try {
              resolve(method.apply(this, args))
            } catch (e) {
              reject(e)
            }
          }
          middleware(req, res, done)
          // A refused request never calls done(): settle once the refusal is sent. resolve() after
          // done() is a no-op, so an allowed call resolves to what the method returned. Not on 'close':
          // a client gone while the store answers would settle the call before the method runs, and a
          // rejection of the method would then reach no one (an unhandled rejection).
          if (res.headersSent || res.writableEnded) resolve(res)
          else res.once('finish', () => resolve(res))
        })
      },
  )
}

const HINT =
  "give it Express's req and res as its first parameters (req, res, next), or as @Req() / @Res() parameters (routing-controllers, NestJS on platform-express). Under NestJS, @tollgate/nestjs is the way to limit controllers."

export { type AdaptiveConcurrencyMiddleware, type AdaptiveConcurrencyOptions, adaptiveConcurrency, type Priority } from './adaptive'
