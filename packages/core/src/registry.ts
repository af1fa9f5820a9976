import type { Algorithm } from './algorithms/algorithm'
import { fixedWindow } from './algorithms/fixed-window'
import { TollgateError } from './errors'
import type { AlgorithmName } from './types'

/*
 * What a limiter can do beyond its core (the fixed window, the memory store, the options every limiter
 * reads), kept in one table that features fill in when registered (features.ts). A bundler keeps only
 * what an app's code reaches: a feature's code is reached through its registration alone, so an app that
 * imports the Limiter of "@tollgate/core/lean" (what @tollgate/web builds on) and registers nothing
 * carries none of it. The Limiter of "@tollgate/core" registers every feature (limiter/full.ts), so an
 * app on Node, or on an adapter, never meets this table.
 */

/**
 * The features' slots. Each is written by its feature (features.ts) and read where the limiter uses it,
 * which gives it its type there: this module, which the limiter's modules import, names none of theirs
 * (they would import it back).
 */
export interface Kit {
  readonly algorithms: { -readonly [N in AlgorithmName]?: Algorithm }
  /** The `lease` option: { parse: parseLease, Leases, models: LEASE_MODELS, refuse: notLeased } (parse-options.ts, counting.ts). */
  leasing?: unknown
  /** `limiter.wait()`: { Waiting, args: waitArguments } (limiter.ts). */
  waiting?: unknown
  /** `blockDuration`: the Lockout class (counting.ts). */
  Lockout?: unknown
  /** `allowList` and `denyList` given as addresses and CIDR ranges: the ClientList class (parse-options.ts). */
  ClientList?: unknown
  /** OpenTelemetry metrics (`meterProvider`, or the global provider) and the `NODE_DEBUG=tollgate` log: Metrics (limiter.ts). */
  Telemetry?: unknown
  /** `actualCost` and `limiter.settle()`: the Settling class (counting.ts). */
  Settling?: unknown
  /** The "did you mean" of an unknown option, from other limiters' names and near spellings: guessOption (parse-options.ts). */
  optionHints?: unknown
  /** A store outside the process: limiter/remote.ts, RemoteKit (limiter.ts, increment-path.ts). */
  remote?: unknown
}

/** The global the table is kept under, named by the shape of Kit (a later shape takes a new name). */
const KIT_KEY: unique symbol = Symbol.for('tollgate.kit.1')

/** Every algorithm's name, registered or not (the `algorithm` option's values). */
export const ALGORITHM_NAMES: readonly AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log', 'concurrency']

/**
 * The features this process's limiters have: the fixed window alone until others are registered. One
 * table per process, on globalThis: an app that loads Tollgate both as ESM and as CommonJS (two copies of
 * this module) still has one, so a store of one copy decides the algorithms a limiter of the other registered.
 */
const shared = globalThis as { [KIT_KEY]?: Kit }
export const KIT: Kit = shared[KIT_KEY] ?? { algorithms: { 'fixed-window': fixedWindow } }
shared[KIT_KEY] = KIT

/** A part of Tollgate an app registers to use (features.ts): `register(gcra, waiting)`. */
export interface Feature {
  /** Its name, as the error of an option that needs it says it. */
  readonly name: string
  readonly install: (kit: Kit) => void
}

/**
 * Makes features available to every limiter of this process, from the next one made: call it once, before
 * making the limiters that use them. Needed only with the Limiter of "@tollgate/core/lean" or
 * "@tollgate/web", which leave out what an app does not register; the Limiter of "@tollgate/core" has
 * every feature.
 */
export function register(...features: readonly Feature[]): void {
  for (const feature of features) {
    if (feature === null || typeof feature !== 'object' || typeof feature.install !== 'function') {
      throw new TollgateError(
        `register() takes Tollgate's features (such as gcra or waiting, imported from the same package), not ${String(feature)}`,
        'TG_INVALID_OPTION',
      )
    }
    feature.install(KIT)
  }
}

/**
 * The error of an option (or a method) whose feature is not registered: it names the option, the
 * feature, and the line that registers it.
 */
export function notRegistered(option: string, value: string, feature: string): TollgateError {
  return new TollgateError(
    `Invalid option "${option}": ${value} needs the ${feature} feature, which this Limiter (@tollgate/web, @tollgate/core/lean) ` +
      `has once registered: call register(${feature}) first, both imported from its package`,
    'TG_INVALID_OPTION',
  )
}

/** The feature that registers an algorithm, by the algorithm's name: "sliding-log" → slidingLog. */
export function featureOf(name: AlgorithmName): string {
  return name.replace(/-(\w)/g, (_, c: string) => c.toUpperCase())
}

/** The registered algorithm named `name`; a TollgateError naming the feature that registers it otherwise. */
export function algorithmOf(name: AlgorithmName): Algorithm {
  const algorithm = KIT.algorithms[name]
  if (algorithm === undefined) throw notRegistered('algorithm', `"${name}"`, featureOf(name))
  return algorithm
}
