import { adapterChoice, type Decision, isThenable, type Limiter, nestedOptions, TollgateError, VISITED } from '@tollgate/core'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import { adapterHooks, asHook, limit, type RateLimitOptions } from './limit'

export {
  type AlgorithmName,
  type Decision,
  type Duration,
  Limiter,
  type LimiterOptions,
  type LimitOptions,
  type Logger,
  MemoryStore,
  RedisStore,
  type Store,
  type StoreErrorPolicy,
  TollgateError,
} from '@tollgate/core'
export type { RateLimitOptions } from './limit'

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
     * `max`, `window`, `limits`, `burst`, `name`, `prefix` and `shadow`. `false` turns Tollgate off for the route.
     */
    rateLimit?: RateLimitOptions | false
  }
  interface FastifyRequest {
    /** The decision of the last Tollgate limit that ran on this request. */
    rateLimit?: Decision
    /** Every Tollgate decision made on this request, in order (the plugin's limit first). */
    rateLimits?: Decision[]
  }
}

type Hook = NonNullable<RateLimitOptions['hook']>
type HookFn = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

const ADAPTER_KEYS = ['hook', 'handler']

const hookOption = (value: unknown): Hook => adapterChoice('hook', value, ['onRequest', 'preHandler'], 'onRequest')

function hooksOf(route: RouteOptions, hook: Hook): HookFn[] {
  const existing: unknown = route[hook]
  return existing === undefined ? [] : Array.isArray(existing) ? existing : [existing as HookFn]
}

function append(route: RouteOptions, hook: Hook, fn: HookFn): void {
  const list = hooksOf(route, hook)
  // A new array: the HEAD route fastify derives from a GET route may share the old one.
  if (!list.includes(fn)) route[hook] = [...list, fn]
}

/**
 * The route limit built for each route. With nested plugins, the nearest one (the last to see the
 * route) builds it, replacing the outer one's, so it inherits the options of the plugin closest to it.
 */
const routeLimits = new WeakMap<object, { hook: Hook; fn: HookFn }>()

const plugin: FastifyPluginAsync<RateLimitOptions> = async (fastify, options) => {
  const hook = hookOption(options.hook)
  const hooks = adapterHooks()
  const global = limit(options, ADAPTER_KEYS, hooks)
  const runGlobal = asHook(global.run)
  // fastify registers HEAD twins of GET routes with the same config object: they share one limit.
  const shared = new WeakMap<object, Map<string, { hook: Hook; fn: HookFn }>>()
  const built = new WeakSet<object>()
  let warned = false

  // The first plugin of a scope names it; a second one in the same scope is reachable only through its requests.
  if (!fastify.hasDecorator('rateLimiter')) fastify.decorate('rateLimiter', global.limiter)

  if (!fastify.hasRequestDecorator('rateLimits')) {
    // Declared up front so fastify's Request keeps one object shape (no property added per request).
    fastify.decorateRequest('rateLimit', undefined)
    fastify.decorateRequest('rateLimits', undefined)
    fastify.decorateRequest(VISITED as unknown as string, undefined)
  }

  // Route limits are built here, once per route, and run as hooks of their route.
  fastify.addHook('onRoute', (route) => {
    const own: unknown = route.config?.rateLimit
    if (own === undefined || own === false) return
    const methods = Array.isArray(route.method) ? route.method.join(',') : route.method
    const url = route.url.length > 1 && route.url.endsWith('/') ? route.url.slice(0, -1) : route.url
    const twin = `${url} ${JSON.stringify(route.constraints ?? {})}`
    let byUrl = shared.get(own as object)
    let entry = methods === 'HEAD' ? byUrl?.get(twin) : undefined
    if (entry === undefined) {
      // A route limit is its own (max, window...), counted the plugin's way (store, key, algorithm...).
      const merged = nestedOptions(options, own, {
        parentPrefix: global.limiter.config.prefix,
        scope: `${methods}${url}`,
        option: `config.rateLimit" of route "${methods} ${route.url}`,
      })
      try {
        entry = { hook: hookOption(merged.hook), fn: asHook(limit(merged, ADAPTER_KEYS, hooks).run) }
      } catch (error) {
        if (!(error instanceof TollgateError)) throw error
        const message = error.message.replace(/ \[TG_[A-Z_]+\]$/, '')
        throw new TollgateError(`Route ${methods} ${route.url}, config.rateLimit: ${message}`, error.code, { cause: error })
      }
      if (byUrl === undefined) {
        byUrl = new Map()
        shared.set(own as object, byUrl)
      }
      byUrl.set(twin, entry)
    }
    built.add(own as object)
    const outer = routeLimits.get(route)
    if (outer !== undefined) route[outer.hook] = hooksOf(route, outer.hook).filter((fn) => fn !== outer.fn)
    routeLimits.set(route, entry)
    append(route, entry.hook, entry.fn)
  })

  // The plugin's own limit is a hook of the scope, so it covers every route of the scope (however
  // the routes and the registration are ordered) and URLs no route matches.
  const globalHook: HookFn = (request, reply, done) => {
    const route = request.routeOptions
    const own = route.config?.rateLimit
    if (own === false) return done()
    if (own !== undefined && !warned && !built.has(own)) {
      warned = true
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

/**
 * Limits a controller method that is a fastify route handler `(request, reply)` (standard TC39
 * decorator). The method runs only when the request is allowed; otherwise the refusal is sent as the
 * plugin sends it and the method returns the reply, so fastify knows the response is handled.
 */
export function RateLimit(options?: Omit<RateLimitOptions, 'hook'>) {
  const { run } = limit(options, ['handler'])
  return function decorate<This, Args extends [FastifyRequest, FastifyReply, ...unknown[]], Result>(
    method: (this: This, ...args: Args) => Result,
    _context: ClassMethodDecoratorContext<This, (this: This, ...args: Args) => Result>,
  ) {
    return function limited(this: This, ...args: Args) {
      const [request, reply] = args
      const go = run(request, reply)
      if (isThenable(go)) return go.then((ok) => (ok ? method.apply(this, args) : reply))
      return go ? method.apply(this, args) : reply
    } as (this: This, ...args: Args) => Result
  }
}
