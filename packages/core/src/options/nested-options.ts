import { invalidOption } from '../errors'
import { subPrefix } from '../keys'
import { isPlainObject } from './checks'

/**
 * Options that define a limit (how many, over what, under which name and key prefix, enforced or
 * not) rather than how to count: a limit nested under another (fastify's route `config.rateLimit`)
 * never inherits these from its parent.
 */
export const LIMIT_DEFINING_KEYS = ['max', 'window', 'limits', 'hashTag', 'burst', 'name', 'prefix', 'shadow'] as const

/**
 * Options of a limit nested under a parent's (a route's own limit under a plugin's): the parent's
 * way of counting (store, key, algorithm, headers...) with the nested limit's own numbers, and its
 * own key prefix (`scope` under the parent's prefix), so the two never add into one count. `option`
 * names the nested limit's option in the error thrown when `own` is not an object of options.
 */
export function nestedOptions<O extends object>(
  parent: O | undefined,
  own: unknown,
  nest: { parentPrefix: string; scope: string; option: string },
): O {
  if (!isPlainObject(own)) throw invalidOption(nest.option, 'an object of options or false', own)
  const merged: Record<string, unknown> = { ...parent }
  for (const key of LIMIT_DEFINING_KEYS) delete merged[key]
  Object.assign(merged, own)
  merged.prefix ??= subPrefix(nest.parentPrefix, nest.scope)
  return merged as O
}
