import type { LeaseModel } from '../algorithms/algorithm'
import { fixedWindowLease } from '../algorithms/fixed-window-lease'
import { gcraLease } from '../algorithms/gcra-lease'
import { invalidOption, TollgateError } from '../errors'
import type { AlgorithmName, Store } from '../types'
import { isPlainObject } from './checks'

/** The `lease` option as given: `true`, or the largest share of what is left one grant may take. */
export type LeaseOption = boolean | { maxShare?: number }

/** The `lease` option once parsed. */
export interface LeaseConfig {
  /** The largest fraction of a key's remaining quota one grant may take, before it is split between lessees. */
  readonly maxShare: number
}

/** The algorithms that lease, and what their units and decisions are under a lease (algorithm.ts, LeaseModel). */
export const LEASE_MODELS: { readonly [N in AlgorithmName]?: LeaseModel } = { 'fixed-window': fixedWindowLease, gcra: gcraLease }

/** Default `maxShare`: half of what is left, so a second process always finds as much again. */
const MAX_SHARE = 0.5

/**
 * Validates `lease` against the rest of the options. A lease is a slice of one counter: the fixed
 * window's (the default) or GCRA's TAT, for one limit under the client key. What cannot be exact with a
 * slice held in a process is refused by name rather than approximated: several limits (one grant per
 * limit could not be all-or-nothing), a `window` function, and the options that give units back or
 * charge more after the response (a refund or a settle of a unit leased elsewhere would move a count the
 * other processes' slices were granted from). Undefined without `lease`, and on a store in this process
 * (a memory store has no round trip to save: the option is a no-op there).
 */
export function parseLease(o: Record<string, unknown>, algorithm: AlgorithmName, store: Store): LeaseConfig | undefined {
  const value = o.lease
  if (value === undefined || value === false) return undefined
  let maxShare = MAX_SHARE
  if (isPlainObject(value)) {
    const keys = Object.keys(value)
    const unknown = keys.find((k) => k !== 'maxShare')
    if (unknown !== undefined) throw invalidOption('lease', `true, false or { maxShare } (no "${unknown}")`, value)
    const share = (value as { maxShare?: unknown }).maxShare
    if (share !== undefined) {
      if (typeof share !== 'number' || !(share > 0 && share <= 1)) throw invalidOption('lease.maxShare', 'a number in (0, 1]', share)
      maxShare = share
    }
  } else if (value !== true) throw invalidOption('lease', 'true, false or { maxShare }', value)
  if (LEASE_MODELS[algorithm] === undefined) {
    const leasing = Object.keys(LEASE_MODELS).map((name) => `"${name}"`)
    throw invalidOption('lease', `no lease with algorithm "${algorithm}" (only ${leasing.join(' and ')} lease quota)`, value)
  }
  const refuse = (name: string, why: string) => {
    throw new TollgateError(`Invalid option "lease": not with ${name}: ${why}`, 'TG_INVALID_OPTION')
  }
  if (o.limits !== undefined) refuse('"limits"', 'a lease is a slice of one limit, and several limits must admit a request all at once')
  if (typeof o.window === 'function') refuse('a "window" function', 'a lease is a slice of one window length')
  if (o.actualCost !== undefined) refuse('"actualCost"', 'a settle after the response would move a count other processes lease from')
  for (const flag of ['skipFailedRequests', 'skipSuccessfulRequests'] as const) {
    if (o[flag] === true) refuse(`"${flag}"`, 'a refund after the response would move a count other processes lease from')
  }
  if (store.local) return undefined
  if (typeof store.lease !== 'function' || typeof store.endLease !== 'function') {
    refuse('this store', 'it has no lease() and endLease() (RedisStore has them)')
  }
  return Object.freeze({ maxShare })
}
