import type { Limiter } from '@tollgate/core'
import { type Decision, isObject, isThenable, type MethodDecorator, methodDecorator, missingRequest } from '@tollgate/core/adapter'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import fp from 'fastify-plugin'
import { adapterHooks, asHook, limit, type RateLimitOptions, type RouteRateLimitOptions } from './hooks'
import { ADAPTER_KEYS, hookOption, routeLimitBuilder } from './route-limits'

// Core's main entry is what an app uses (the stores, the error and its codes, the limiter behind the
// middleware, the types its options and decisions are made of), so all of it is re-exported and an app
// imports from this package alone. A store author imports @tollgate/core/store, an adapter author
// @tollgate/core/adapter.
export * from '@tollgate/core'
export type { RateLimitOptions, RouteRateLimitOptions } from './hooks'

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The limiter of the first Tollgate plugin registered in this scope (or an ancestor's): its events
     * (`limited`, `storeError`, `fallback`, `recover`) and `consume`/`peek`/`reset` for code outside HTTP.
     */
    rateLimiter: Limiter<FastifyRequest>
  }
  interface FastifyContextConfig {
    /**
     * This route's own limit, stacked on the plugin's. It takes the plugin's options other than
     * `max`, `window`, `limits`, `burst`, `name`, `prefix` and `shadow`, and counts in the plugin's store
     * unless it names its own. Routes with the same `group` share one counter. `false` turns Tollgate off for the route.
     */
    rateLimit?: RouteRateLimitOptions | false
  }
  interface FastifyRequest {
    /** The decision of the last Tollgate limit that ran on this request. */
    rateLimit?: Decision
    /** Every Tollgate decision made on this request, in order (the plugin's limit first). */
    rateLimits?: Decision[]
  }
}

type HookFn = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

/**
 * The request's route config. `request.routeOptions` builds a fresh object of a dozen fields (and asks
 * the router about version constraints) on every read, a measurable share of the plugin's cost per
 * request; the route context it reads from is a symbol-keyed property of the request, found once.
 * Should fastify move it, this falls back to `routeOptions`.
 */
let contextKey: symbol | null | undefined
function routeConfig(request: FastifyRequest): { rateLimit?: unknown } | undefined {
  if (contextKey === undefined) contextKey = Object.getOwnPropertySymbols(request).find((s) => s.description === 'fastify.context') ?? null
  const context =
    contextKey === null ? undefined : (request as unknown as Record<symbol, { config?: { rateLimit?: unknown } } | undefined>)[contextKey]
  return context === undefined ? request.routeOptions.config : context.config
}

const plugin: FastifyPluginAsync<RateLimitOptions> = async (fastify, options) => {
  const hook = hookOption(options.hook)
  const hooks = adapterHooks()
  const global = limit(options, ADAPTER_KEYS, hooks)
  const runGlobal = asHook(global.run)
  const built = new WeakSet<object>()
  const limiters = new Set([global.limiter])
  let warned = false

  // The first plugin of a scope names it; a second one in the same scope is reachable only through its requests.
  if (!fastify.hasDecorator('rateLimiter')) fastify.decorate('rateLimiter', global.limiter)

  // rateLimit, rateLimits and the visit mark are not request decorators: fastify's Request constructor
  // assigns each decorator with a megamorphic keyed store on every request, limited or not, which
  // cost more than adding the three properties in the hook (`npm run bench -- instructions --symbols` counts both).

  // Route limits are built here, once per route, and run as hooks of their route.
  fastify.addHook('onRoute', routeLimitBuilder(options, global.limiter.config, hooks, built, limiters))

  // app.close(): the limiters give back what a `lease` holds, rather than let it lapse at the window's end.
  fastify.addHook('onClose', async () => {
    await Promise.all([...limiters].map((limiter) => limiter.close()))
  })

  // The plugin's own limit is a hook of the scope, so it covers every route of the scope (however
  // the routes and the registration are ordered) and URLs no route matches.
  const globalHook: HookFn = (request, reply, done) => {
    const own = routeConfig(request)?.rateLimit
    if (own === false) return done()
    if (own !== undefined && !warned && !built.has(own as object)) {
      warned = true
      const route = request.routeOptions
      global.limiter.config.logger.warn(
        `Tollgate: route ${route.method} ${route.url} has config.rateLimit, but it was declared before the plugin was registered, so only the plugin's limit applies to it; await app.register(rateLimit, ...) before declaring routes.`,
      )
    }
    runGlobal(request, reply, done)
  }
  if (hook === 'onRequest') fastify.addHook('onRequest', globalHook)
  else fastify.addHook('preHandler', globalHook)
}

/**
 * Rate limiting plugin for fastify 5: `await app.register(rateLimit, { max: 10 })` limits every route
 * of the scope it is registered in (and its children); a route adds a limit of its own with
 * `config: { rateLimit: { max: 5 } }` (read when the route is declared, so register the plugin first)
 * or opts out with `config: { rateLimit: false }`.
 */
export const rateLimit = fp(plugin, { name: '@tollgate/fastify', fastify: '5.x' })

/** A fastify reply: it leads to its request (`reply.request`); a request does not lead to its reply. */
const isReply = (x: unknown): x is FastifyReply =>
  isObject(x) && typeof x.send === 'function' && typeof x.code === 'function' && typeof x.header === 'function' && isObject(x.request)

/**
 * Limits a controller method (standard TC39 or legacy `experimentalDecorators` decorator). It finds
 * fastify's reply among the method's arguments (a route handler's `(request, reply)`, or a `@Res()`
 * parameter) and its request through `reply.request`. The method runs only when the request is
 * allowed; otherwise the refusal is sent as the plugin sends it and the method returns the reply, so
 * fastify knows the response is handled. A call without a reply fails with TG_DECORATOR_NO_REQUEST.
 */
export function RateLimit(options?: Omit<RateLimitOptions, 'hook'>): MethodDecorator {
  const { run } = limit(options, ['handler'])
  return methodDecorator(
    (method, label) =>
      function limited(this: unknown, ...args: unknown[]) {
        const reply = args.find(isReply)
        if (reply === undefined) {
          throw missingRequest(
            label(this),
            args,
            'fastify reply',
            'give it (request, reply) as a route handler has them, or a @Res() reply parameter.',
          )
        }
        const go = run(reply.request, reply, undefined)
        if (isThenable(go)) return go.then((ok) => (ok ? method.apply(this, args) : reply))
        return go ? method.apply(this, args) : reply
      },
  )
}
export { type AdaptiveConcurrencyHook, type AdaptiveConcurrencyOptions, adaptiveConcurrency, type Priority } from './adaptive'
