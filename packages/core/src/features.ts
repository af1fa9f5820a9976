import { concurrency as concurrencyAlgorithm } from './algorithms/concurrency'
import { gcra as gcraAlgorithm } from './algorithms/gcra'
import { slidingLog as slidingLogAlgorithm } from './algorithms/sliding-log'
import { slidingWindow as slidingWindowAlgorithm } from './algorithms/sliding-window'
import { ClientList } from './client-lists'
import type { LeaseCounting } from './limiter/counting'
import { Leases } from './limiter/fast-path/leases'
import type { WaitingKit } from './limiter/limiter'
import { Lockout } from './limiter/lockout'
import { notLeased } from './limiter/not-leased'
import { remoteStores } from './limiter/remote'
import type { TelemetryMaker } from './limiter/reporting'
import { Settling } from './limiter/settling'
import { Metrics } from './limiter/telemetry'
import { Waiting, waitArguments } from './limiter/waiting'
import { LEASE_MODELS, parseLease } from './options/lease-option'
import type { LeaseParsing } from './options/parse-options'
import { guessOption } from './options/peer-names'
import type { Feature } from './registry'

/*
 * The features an app registers (registry.ts) when it imports the Limiter of "@tollgate/core/lean" or
 * "@tollgate/web": `register(gcra, waiting)`. Each is a plain object, so a bundler leaves out every one an
 * app does not name, and the code only it reaches.
 */

/** `algorithm: "gcra"`. */
export const gcra: Feature = {
  name: 'gcra',
  install: (kit) => {
    kit.algorithms.gcra = gcraAlgorithm
  },
}

/** `algorithm: "sliding-window"`. */
export const slidingWindow: Feature = {
  name: 'slidingWindow',
  install: (kit) => {
    kit.algorithms['sliding-window'] = slidingWindowAlgorithm
  },
}

/** `algorithm: "sliding-log"`. */
export const slidingLog: Feature = {
  name: 'slidingLog',
  install: (kit) => {
    kit.algorithms['sliding-log'] = slidingLogAlgorithm
  },
}

/** `algorithm: "concurrency"`. */
export const concurrency: Feature = {
  name: 'concurrency',
  install: (kit) => {
    kit.algorithms.concurrency = concurrencyAlgorithm
  },
}

/** The `lease` option. */
export const leasing: Feature = {
  name: 'leasing',
  install: (kit) => {
    kit.leasing = { parse: parseLease, Leases, models: LEASE_MODELS, refuse: notLeased } satisfies LeaseParsing & LeaseCounting
  },
}

/** `limiter.wait()`. */
export const waiting: Feature = {
  name: 'waiting',
  install: (kit) => {
    kit.waiting = { Waiting, args: waitArguments } satisfies WaitingKit
  },
}

/** The `actualCost` option and `limiter.settle()`. */
export const settling: Feature = {
  name: 'settling',
  install: (kit) => {
    kit.Settling = Settling
  },
}

/**
 * The "did you mean" of an unknown option: another limiter's name for it (express-rate-limit's `windowMs`,
 * rate-limiter-flexible's `points`...) or a near spelling. Without it the error still lists the known options.
 */
export const optionHints: Feature = {
  name: 'optionHints',
  install: (kit) => {
    kit.optionHints = guessOption
  },
}

/** The `blockDuration` option. */
export const lockouts: Feature = {
  name: 'lockouts',
  install: (kit) => {
    kit.Lockout = Lockout
  },
}

/** `allowList` and `denyList` given as addresses and CIDR ranges (a function of the request needs nothing). */
export const clientLists: Feature = {
  name: 'clientLists',
  install: (kit) => {
    kit.ClientList = ClientList
  },
}

/** OpenTelemetry metrics (`meterProvider`, or the global MeterProvider) and the `NODE_DEBUG=tollgate` log. */
export const metrics: Feature = {
  name: 'metrics',
  install: (kit) => {
    kit.Telemetry = Metrics satisfies TelemetryMaker
  },
}

/** Every feature: what the Limiter of "@tollgate/core" has. */
export const allFeatures: readonly Feature[] = [
  gcra,
  slidingWindow,
  slidingLog,
  concurrency,
  leasing,
  waiting,
  lockouts,
  clientLists,
  metrics,
  optionHints,
  settling,
  remoteStores,
]

export { remoteStores }
