import type { Decision } from './types'
import { recordDecision, withVisitor } from './visits'

/*
 * Where a limiter keeps its decisions on an Express request: for @tollgate/express, and for
 * @tollgate/nestjs on platform-express, whose requests are Express's. Typed structurally, so core
 * depends on no framework.
 */

/** The parts of an Express request read here. */
type Request = object & { res?: { locals?: unknown } }

/**
 * Each request's decisions, outside the request object. Express re-prototypes every request
 * (`setPrototypeOf(req, app.request)`), and adding properties to such an object is slow: in a real
 * Express 5 server on the bench machine, a middleware writing the three a limiter needs (its visit
 * mark, `rateLimit`, `rateLimits`) took 3.3 µs per request and cost 10% of the server's requests per
 * second. `req.rateLimit` and `req.rateLimits` are accessors on the app's request prototype instead.
 * The limiters that met a request share the entry, so a request costs one entry in all.
 */
class Visits {
  decisions: Decision[] | undefined = undefined
  constructor(public by: object | object[]) {}
}

/**
 * Where the entry lives: under a symbol in `res.locals`, the object Express gives every response for
 * the request's own data (created with no prototype, so one more key is one hash insert): 0.15 µs in
 * that server, against 0.45 µs for an entry in a WeakMap keyed by the request, whose entries the
 * collector must also trace (an ephemeron each). A request with no `res.locals` (not set up by
 * Express, or replaced by something that is not an object) uses the WeakMap. Code that replaces
 * `res.locals` with another object between two limiters hides the earlier decisions from the later
 * one (and a limiter mounted on both sides of it counts such a request twice): the README asks to add
 * to it instead, as Express's own documentation does.
 */
const VISITS = Symbol('tollgate.visits')
type Locals = { [VISITS]?: Visits }
const visitsByRequest = new WeakMap<object, Visits>()

function localsOf(req: Request): Locals | undefined {
  const locals: unknown = req.res?.locals
  return typeof locals === 'object' && locals !== null ? (locals as Locals) : undefined
}

/** True for a request whose response has Express's `res.locals`: an Express request, as Express sets each up. */
export function isExpressRequest(req: object): boolean {
  return localsOf(req) !== undefined
}

/** The request's entry, from its `res.locals` (`locals`, as localsOf gives it) or the WeakMap. */
function visitsIn(req: Request, locals: Locals | undefined): Visits | undefined {
  return locals === undefined ? visitsByRequest.get(req) : locals[VISITS]
}

function visitsOf(req: Request): Visits | undefined {
  return visitsIn(req, localsOf(req))
}

function keep(req: Request, locals: Locals | undefined, visits: Visits): void {
  if (locals === undefined) visitsByRequest.set(req, visits)
  else locals[VISITS] = visits
}

/** Express's base request prototypes that have the accessors, and the app.request prototypes known to inherit them. */
const withAccessors = new WeakSet<object>()
const appsReady = new WeakSet<object>()
/** The app.request prototype of the last request recorded, known ready: a server's requests nearly all share one. */
let lastReady: object | undefined

function own(target: object, name: string, value: unknown): void {
  Object.defineProperty(target, name, { value, writable: true, enumerable: true, configurable: true })
}

/**
 * Defines the accessors once on Express's shared request prototype, the one with `accepts`, which
 * every app's `app.request` inherits from (a mounted sub-app's through its parent's), so they work in
 * every app. False when `req` is not an Express request.
 */
function exposes(req: Request): boolean {
  const appRequest: object | null = Object.getPrototypeOf(req)
  if (appRequest === null) return false
  if (appRequest === lastReady) return true
  if (appsReady.has(appRequest)) {
    lastReady = appRequest
    return true
  }
  if (!Object.hasOwn(appRequest, 'app')) return false
  let proto: object | null = appRequest
  while (proto !== null && !Object.hasOwn(proto, 'accepts')) proto = Object.getPrototypeOf(proto)
  if (proto === null) return false
  if (!withAccessors.has(proto)) {
    // Another copy of @tollgate/core (two versions installed side by side) got there first: use plain
    // properties, through its setters.
    if (Object.hasOwn(proto, 'rateLimits')) return false
    defineAccessors(proto)
    withAccessors.add(proto)
  }
  appsReady.add(appRequest)
  lastReady = appRequest
  return true
}

function defineAccessors(proto: object): void {
  Object.defineProperties(proto, {
    rateLimit: {
      get(this: object) {
        return visitsOf(this)?.decisions?.at(-1)
      },
      // Assigning still works: the value becomes the request's own property.
      set(this: object, value: unknown) {
        own(this, 'rateLimit', value)
      },
      configurable: true,
    },
    rateLimits: {
      get(this: object) {
        return visitsOf(this)?.decisions
      },
      set(this: object, value: unknown) {
        own(this, 'rateLimits', value)
      },
      configurable: true,
    },
  })
}

/** True the first time `limiter` meets this request: a limiter mounted on the app and on a route counts it once. */
export function expressVisit(req: Request, limiter: object): boolean {
  const locals = localsOf(req)
  const visits = visitsIn(req, locals)
  const by = withVisitor(visits?.by, limiter)
  if (by === undefined) return false
  if (visits === undefined) keep(req, locals, new Visits(by))
  else visits.by = by
  return true
}

/**
 * Records a decision on the request (met by `expressVisit` first), read back through `req.rateLimit`
 * and `req.rateLimits`; returns every decision made on it so far.
 */
export function recordOnExpressRequest(req: Request, decision: Decision): Decision[] {
  if (!exposes(req)) {
    // Not an Express request (a test double, a custom server): plain properties.
    return recordDecision(req as { rateLimit?: Decision; rateLimits?: Decision[] }, decision)
  }
  const locals = localsOf(req)
  let visits = visitsIn(req, locals)
  if (visits === undefined) {
    visits = new Visits([])
    keep(req, locals, visits)
  }
  if (visits.decisions === undefined) visits.decisions = [decision]
  else visits.decisions.push(decision)
  return visits.decisions
}
