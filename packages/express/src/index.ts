import { Limiter, type LimiterOptions } from '@tollgate/core'
import { adapterFunction, createGate, type Decision, isThenable, type ResponseIO } from '@tollgate/core/adapter'
import type { NextFunction, Request, Response } from 'express'
import { record, visit } from './request-decisions'

// The public API of @tollgate/core, so an app imports from one package.
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
  ip: (req: Request) => req.ip,
  diagnose(req: Request): string | null | undefined {
    const trust = req.app.get('trust proxy')
    // true makes req.ip the leftmost X-Forwarded-For entry, which any client can write, even through
    // a proxy that appends to the header (issue 12). It is never needed: a hop count or the proxies'
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
  record: (req, _res, decision) => record(req, decision),
  setHeaders(res, headers) {
    for (const name in headers) res.setHeader(name, headers[name]!)
  },
  status: (res, code) => void res.status(code),
  send(res, rejection) {
    res.setHeader('Content-Type', rejection.contentType)
    res.end(rejection.body)
  },
  raw: (res) => res,
  // Kept off the request, with its decisions: adding a property to an Express request is slow (request-decisions.ts).
  visit,
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

/**
 * Limits a controller method whose first two arguments are Express's `req` and `res`
 * (standard TC39 decorator). The method body runs only when the request is allowed; otherwise the
 * 429 is sent exactly as the middleware sends it.
 */
export function RateLimit(options?: RateLimitOptions) {
  const middleware = rateLimit(options)
  return function decorate<This, Args extends [Request, Response, ...unknown[]], Result>(
    method: (this: This, ...args: Args) => Result,
    _context: ClassMethodDecoratorContext<This, (this: This, ...args: Args) => Result>,
  ) {
    return function limited(this: This, ...args: Args): Promise<Awaited<Result> | undefined> {
      const [req, res] = args
      const next = typeof args[2] === 'function' ? (args[2] as NextFunction) : undefined
      return new Promise((resolve, reject) => {
        const done = (error?: unknown) => {
          if (error !== undefined && error !== null) {
            if (next !== undefined) return resolve(void next(error))
            return reject(error)
          }
          try {
            resolve(method.apply(this, args) as Awaited<Result>)
          } catch (e) {
            reject(e)
          }
        }
        middleware(req, res, done)
        // A refused request never calls done(): settle once the response is finished.
        if (res.headersSent || res.writableEnded) resolve(undefined)
        else res.once('finish', () => resolve(undefined))
      })
    }
  }
}
