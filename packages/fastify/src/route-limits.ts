import { TollgateError } from '@tollgate/core'
import { adapterChoice, nestedOptions } from '@tollgate/core/adapter'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify'
import { type adapterHooks, asHook, limit, type RateLimitOptions } from './hooks'

export type Hook = NonNullable<RateLimitOptions['hook']>
type HookFn = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

export const ADAPTER_KEYS = ['hook', 'handler']

export const hookOption = (value: unknown): Hook => adapterChoice('hook', value, ['onRequest', 'preHandler'], 'onRequest')

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

/**
 * The plugin's onRoute hook: builds each route's own limit (`config.rateLimit`) once, when the route
 * is declared, counted the plugin's way (store, key, algorithm...), and runs it as a hook of its route.
 * `built` collects the route configs it has seen, so the plugin can warn about routes declared before it.
 */
export function routeLimitBuilder(
  options: RateLimitOptions,
  parentPrefix: string,
  hooks: ReturnType<typeof adapterHooks>,
  built: WeakSet<object>,
): (route: RouteOptions) => void {
  // fastify registers HEAD twins of GET routes with the same config object: they share one limit.
  const shared = new WeakMap<object, Map<string, { hook: Hook; fn: HookFn }>>()
  return (route) => {
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
        parentPrefix,
        scope: `${methods}${url}`,
        option: `config.rateLimit" of route "${methods} ${route.url}`,
      })
      try {
        entry = { hook: hookOption(merged.hook), fn: asHook(limit(merged, ADAPTER_KEYS, hooks).run) }
      } catch (error) {
        if (!(error instanceof TollgateError)) throw error
        throw new TollgateError(`Route ${methods} ${route.url}, config.rateLimit: ${error.detail}`, error.code, { cause: error })
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
  }
}
