import { type Limiter, type Store, TollgateError } from '@tollgate/core'
import { adapterChoice, nestedOptions } from '@tollgate/core/adapter'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify'
import { type adapterHooks, asHook, limit, type RateLimitOptions, type RouteRateLimitOptions } from './hooks'

export type Hook = NonNullable<RateLimitOptions['hook']>
type HookFn = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void
type Entry = { hook: Hook; fn: HookFn }

export const ADAPTER_KEYS = ['hook', 'handler']
/** A route's limit also takes `group`, which names a counter shared with other routes (not a plugin option). */
const ROUTE_KEYS = [...ADAPTER_KEYS, 'group']

export const hookOption = (value: unknown): Hook => adapterChoice('hook', value, ['onRequest', 'preHandler'], 'onRequest')

function groupOption(value: unknown): string | undefined {
  if (value === undefined || (typeof value === 'string' && value.length > 0)) return value
  const got =
    typeof value === 'string' ? `${JSON.stringify(value)} (string)` : value === null ? 'null' : `${String(value)} (${typeof value})`
  throw new TollgateError(`Invalid option "group": expected a non-empty string, got ${got}`, 'TG_INVALID_OPTION')
}

/** Same keys, same values: what makes two routes' options one group limit. */
function sameOptions(a: object, b: object): boolean {
  const keys = Object.keys(a)
  return keys.length === Object.keys(b).length && keys.every((k) => (a as Record<string, unknown>)[k] === (b as Record<string, unknown>)[k])
}

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
const routeLimits = new WeakMap<object, Entry>()

/**
 * The plugin's onRoute hook: builds each route's own limit (`config.rateLimit`) once, when the route
 * is declared, counted the plugin's way (key, algorithm... and the plugin's store instance), and runs
 * it as a hook of its route. Routes naming the same `group` share one limit, built for the first.
 * `built` collects the route configs it has seen, so the plugin can warn about routes declared before it;
 * `limiters` the limiters it builds, so the plugin can close them.
 */
export function routeLimitBuilder(
  options: RateLimitOptions,
  parent: { readonly prefix: string; readonly store: Store },
  hooks: ReturnType<typeof adapterHooks>,
  built: WeakSet<object>,
  limiters: Set<Limiter<FastifyRequest>>,
): (route: RouteOptions) => void {
  // fastify registers HEAD twins of GET routes with the same config object: they share one limit.
  const shared = new WeakMap<object, Map<string, Entry>>()
  const groups = new Map<string, Entry & { own: object }>()
  return (route) => {
    const own: unknown = route.config?.rateLimit
    if (own === undefined || own === false) return
    const methods = Array.isArray(route.method) ? route.method.join(',') : route.method
    const url = route.url.length > 1 && route.url.endsWith('/') ? route.url.slice(0, -1) : route.url
    const twin = `${url} ${JSON.stringify(route.constraints ?? {})}`
    let byUrl = shared.get(own as object)
    let entry = methods === 'HEAD' ? byUrl?.get(twin) : undefined
    if (entry === undefined) {
      const group = (own as RouteRateLimitOptions | null)?.group
      // A route limit is its own (max, window...), counted the plugin's way (store, key, algorithm...).
      const merged = nestedOptions<RouteRateLimitOptions>(options, own, {
        parentPrefix: parent.prefix,
        scope: group === undefined ? `${methods}${url}` : `group:${String(group)}`,
        option: `config.rateLimit" of route "${methods} ${route.url}`,
      })
      try {
        entry = build(own as object, merged)
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

  function build(own: object, merged: RouteRateLimitOptions): Entry {
    const group = groupOption(merged.group)
    const known = group === undefined ? undefined : groups.get(group)
    if (known !== undefined) {
      // One counter needs one limit: a route may not bring other numbers to a group.
      if (sameOptions(known.own, own)) return known
      throw new TollgateError(
        `Invalid option "group": the routes of group "${group}" share one limit, so they need the same config.rateLimit (share one options object), but this route's differs from the first one's`,
        'TG_INVALID_OPTION',
      )
    }
    // The plugin's store instance unless the route names one: the prefix keeps counts apart.
    merged.store ??= parent.store
    const made = limit(merged, ROUTE_KEYS, hooks)
    limiters.add(made.limiter)
    const entry = { hook: hookOption(merged.hook), fn: asHook(made.run) }
    if (group !== undefined) groups.set(group, { ...entry, own })
    return entry
  }
}
