import { describeValue, TollgateError } from '../errors'
import { clientKey } from '../keys'
import type { Config } from '../options/parse-options'
import type { CallScope } from './call-parts'

/*
 * The keys of a `consume`, `peek`, `reset` or `wait` call for limits with keys of their own, as the
 * caller passes them (ScopeOptions), checked against the limiter's limits and turned into the call's
 * scope. A request's keys come from the options' functions instead (request-inputs.ts).
 */

/**
 * The keys `consume`, `peek` and `reset` take, outside HTTP, for limits with keys of their own:
 * `keys[i]` is limit i's key, where `limits[i]` has a `key` (the others count under the call's key),
 * and `hashTag` the hash tag, where the limiter has a `hashTag` option.
 */
export interface ScopeOptions {
  keys?: Readonly<Record<number, string | undefined>>
  hashTag?: string
}

/**
 * The keys of a `consume`, `peek` or `reset` call (ScopeOptions) of a limiter whose limits have keys
 * of their own, undefined for any other limiter. `partial` (reset) lets keys be left out: the limits
 * whose keys were given are then listed in `only`.
 */
export function scopeOf<Req>(
  c: Config<Req>,
  decider: { scope(clientKey: string, own: readonly (string | undefined)[], tag: string | undefined): CallScope },
  callKey: string,
  options: ScopeOptions | undefined,
  partial: boolean,
): { scope?: CallScope; only?: number[] } {
  const keys = options?.keys
  const hashTag = options?.hashTag
  if (c.limitKeys === undefined) {
    if (keys !== undefined) throw usage('keys', "this limiter's limits have no key of their own (limits[i].key)")
    if (hashTag !== undefined) throw usage('hashTag', 'this limiter has no hashTag option')
    return {}
  }
  if (keys !== undefined && (keys === null || typeof keys !== 'object')) throw usage('keys', 'expected an array of keys, one per limit')
  let tag: string | undefined
  if (c.hashTag !== undefined) {
    if (typeof hashTag !== 'string' || hashTag.length === 0)
      throw usage('hashTag', `this limiter has a hashTag option: pass the hash tag, got ${describeValue(hashTag)}`)
    tag = clientKey(hashTag)
  } else if (hashTag !== undefined) throw usage('hashTag', 'this limiter has no hashTag option')
  const own: (string | undefined)[] = []
  const only: number[] = []
  c.limitKeys.forEach((fn, i) => {
    const given = keys?.[i]
    if (fn === undefined) {
      if (given !== undefined) throw usage(`keys[${i}]`, `limits[${i}] has no key of its own: it counts under the call's key`)
      own.push(undefined)
      only.push(i)
    } else if (given === undefined && partial) own.push(callKey)
    else if (typeof given !== 'string' || given.length === 0) {
      throw usage(`keys[${i}]`, `limits[${i}] has a key of its own: pass it as keys[${i}], got ${describeValue(given)}`)
    } else {
      own.push(clientKey(given))
      only.push(i)
    }
  })
  return { scope: decider.scope(callKey, own, tag), ...(partial ? { only } : {}) }
}

/** A `consume`, `peek` or `reset` call whose keys do not fit the limiter's limits. */
function usage(name: string, problem: string): TollgateError {
  return new TollgateError(`Argument "${name}": ${problem}`, 'TG_INVALID_REQUEST_VALUE')
}
