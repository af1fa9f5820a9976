import { type Decision, recordDecision } from '@tollgate/core/adapter'

/*
 * Where an Express app reads its decisions: `req.rateLimit` (the last) and `req.rateLimits` (all, in
 * order). They are kept in `res.locals`, under a symbol, and read through two accessors on the app's
 * own request prototype, `app.request`, which Express documents as the place for app-specific
 * request extensions. Only the apps where a Tollgate limiter runs get them (the topmost app of a
 * mounted chain, so its sub-apps inherit them, as Express sets their prototypes); express.request,
 * which every app in the process shares, is left alone.
 *
 * Why not plain properties of the request, as express-rate-limit sets them: Express re-prototypes
 * every request (`setPrototypeOf(req, app.request)`), after which V8 gives each request a hidden class
 * of its own, so every property added to one copies that class and its property descriptors, on every
 * request (visits.ts). `res.locals` is a dictionary from the start.
 *
 * A request that does not reach its app's prototype (no `req.app`, or a chain set up by hand) gets
 * plain properties instead, as on the other frameworks.
 */

/** The parts of an Express request and app read here, typed structurally (loaded on platform-fastify too, by @tollgate/nestjs). */
type App = { request?: unknown; parent?: unknown }
type Request = object & { app?: unknown; res?: { locals?: unknown }; rateLimit?: Decision; rateLimits?: Decision[] }

const DECISIONS = Symbol('tollgate.decisions')
const EXPOSED = Symbol('tollgate.decisionAccessors')
type Locals = { [DECISIONS]?: Decision[] }
type Holder = { res?: { locals?: Locals } }

function decisionsOf(req: Holder): Decision[] | undefined {
  const locals = req.res?.locals
  return typeof locals === 'object' && locals !== null ? locals[DECISIONS] : undefined
}

/** An assignment (`req.rateLimit = x`) makes an own property of that request, as if the accessor were not there. */
function ownProperty(name: string) {
  return function set(this: object, value: unknown) {
    Object.defineProperty(this, name, { value, writable: true, enumerable: true, configurable: true })
  }
}

const ACCESSORS: PropertyDescriptorMap = {
  rateLimit: {
    configurable: true,
    get(this: Holder) {
      const all = decisionsOf(this)
      return all === undefined ? undefined : all[all.length - 1]
    },
    set: ownProperty('rateLimit'),
  },
  rateLimits: {
    configurable: true,
    get(this: Holder) {
      return decisionsOf(this)
    },
    set: ownProperty('rateLimits'),
  },
  [EXPOSED]: { value: true },
}

/** Puts the accessors on the request prototype of the topmost app above `app`, once. */
function expose(app: App): void {
  let top = app
  for (let seen = 0; typeof top.parent === 'function' && seen < 100; seen++) top = top.parent as App
  const proto = top.request
  if (typeof proto !== 'object' || proto === null || Object.hasOwn(proto, EXPOSED)) return
  // An app that defines these names itself keeps its own.
  if (Object.hasOwn(proto, 'rateLimit') || Object.hasOwn(proto, 'rateLimits')) return
  Object.defineProperties(proto, ACCESSORS)
}

/** Records a decision where an Express app reads it; returns every decision so far on this request. */
export function expressRecord(req: Request, decision: Decision): Decision[] {
  const r = req as Request & { [EXPOSED]?: true }
  if (r[EXPOSED] !== true && typeof r.app === 'function') expose(r.app as App)
  const locals = r.res?.locals
  if (r[EXPOSED] !== true || typeof locals !== 'object' || locals === null) return recordDecision(r, decision)
  const marks = locals as Locals
  const all = marks[DECISIONS]
  if (all !== undefined) {
    all.push(decision)
    return all
  }
  const first = [decision]
  marks[DECISIONS] = first
  return first
}
