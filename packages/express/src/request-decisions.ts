import { type Decision, recordDecision, withVisitor } from '@tollgate/core/adapter'
import type { Request } from 'express'

/**
 * Each request's decisions, outside the request object. Express re-prototypes every request
 * (`setPrototypeOf(req, app.request)`), and adding properties to such an object takes it off V8's fast
 * path: two property writes cost ~7 µs per request in CPU profiles (half in GC), more than the rest of
 * the limiter. `req.rateLimit` and `req.rateLimits` are accessors on the app's request prototype instead.
 * The limiters that met a request share the entry, so a request costs one entry in all.
 */
class Visits {
  decisions: Decision[] | undefined = undefined
  constructor(public by: object | object[]) {}
}

/**
 * Where the entry lives: under a symbol in `res.locals`, the object Express gives every response for
 * the request's own data (created with no prototype, so one more key is one hash insert). A WeakMap
 * keyed by the request cost ~1 µs per request more in a real server (bench/README.md): each entry is
 * an ephemeron the collector must trace, and every request adds one. A request with no `res.locals`
 * (not set up by Express, or replaced by something that is not an object) uses the WeakMap.
 */
const VISITS = Symbol('tollgate.visits')
type Locals = { [VISITS]?: Visits }
const visitsByRequest = new WeakMap<object, Visits>()

function localsOf(req: Request): Locals | undefined {
  const locals: unknown = (req as { res?: { locals?: unknown } }).res?.locals
  return typeof locals === 'object' && locals !== null ? (locals as Locals) : undefined
}

function visitsOf(req: Request): Visits | undefined {
  const locals = localsOf(req)
  return locals === undefined ? visitsByRequest.get(req) : locals[VISITS]
}

function keep(req: Request, visits: Visits): void {
  const locals = localsOf(req)
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
    // Another copy of this adapter got there first: use plain properties through its setters.
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
        return visitsOf(this as Request)?.decisions?.at(-1)
      },
      // Assigning still works: the value becomes the request's own property.
      set(this: object, value: unknown) {
        own(this, 'rateLimit', value)
      },
      configurable: true,
    },
    rateLimits: {
      get(this: object) {
        return visitsOf(this as Request)?.decisions
      },
      set(this: object, value: unknown) {
        own(this, 'rateLimits', value)
      },
      configurable: true,
    },
  })
}

/** True the first time `limiter` meets this request: a limiter mounted on the app and on a route counts it once. */
export function visit(req: Request, limiter: object): boolean {
  const visits = visitsOf(req)
  const by = withVisitor(visits?.by, limiter)
  if (by === undefined) return false
  if (visits === undefined) keep(req, new Visits(by))
  else visits.by = by
  return true
}

/** Records a decision on the request (met by `visit` first); returns every decision made on it so far. */
export function record(req: Request, decision: Decision): Decision[] {
  if (!exposes(req)) {
    // Not an Express request (a test double, a custom server): plain properties.
    return recordDecision(req, decision)
  }
  let visits = visitsOf(req)
  if (visits === undefined) {
    visits = new Visits([])
    keep(req, visits)
  }
  if (visits.decisions === undefined) visits.decisions = [decision]
  else visits.decisions.push(decision)
  return visits.decisions
}
