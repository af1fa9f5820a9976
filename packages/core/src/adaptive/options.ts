import { type Duration, parseDuration } from '../duration'
import { invalidOption, rejectUnknown } from '../errors'
import { isPlainObject } from '../options/checks'
import type { MeterProviderLike } from '../types'
import type { AdaptiveGateConfig, Priority } from './gate'
import type { LimitAlgorithmName } from './limits'

/** Options of `adaptiveConcurrency` (the adapters' middleware over AdaptiveGate). */
export interface AdaptiveConcurrencyOptions<Req = unknown> {
  /** How the limit follows latency. @default 'gradient2' */
  algorithm?: LimitAlgorithmName
  /** The limit before anything is measured. @default 20 */
  initialLimit?: number
  /** The limit never goes below this. @default 4 */
  minLimit?: number
  /** The limit never goes above this. @default 1000 */
  maxLimit?: number
  /** How far latency may grow over the unloaded latency before the limit falls (1.2: by a fifth). @default 1.2 */
  tolerance?: number
  /** How long a request may wait for a slot. @default the service's unloaded latency; half of it while the limit binds */
  queueTimeout?: Duration
  /** Requests that may wait for a slot at once. @default the limit */
  maxQueue?: number
  /** Event-loop utilisation (0 to 1) over which the process counts as overloaded; false to ignore it. @default 0.95 */
  eventLoopUtilization?: number | false
  /** The class of a request: lower classes are shed first. @default every request 'normal' */
  priority?: (req: Req) => Priority
  /** Latency is measured over intervals of this length. @default '100ms' */
  interval?: Duration
  /** The unloaded latency is the lowest seen over this long. @default '30s' */
  baselineWindow?: Duration
  /** The gate's name in its metrics (`tollgate.gate`). @default 'default' */
  name?: string
  /** Where its metrics go. @default the global MeterProvider of @opentelemetry/api, when one is registered */
  meterProvider?: MeterProviderLike
}

const KNOWN = [
  'algorithm',
  'initialLimit',
  'minLimit',
  'maxLimit',
  'tolerance',
  'queueTimeout',
  'maxQueue',
  'eventLoopUtilization',
  'priority',
  'interval',
  'baselineWindow',
  'name',
  'meterProvider',
]

/** Validated options: the gate's config and the request's class. */
export interface AdaptiveConfig<Req> {
  readonly gate: AdaptiveGateConfig
  readonly priority: ((req: Req) => Priority) | undefined
  readonly name: string
  readonly meterProvider: MeterProviderLike | undefined
}

/** Checks every option at construction: a bad one throws, naming it and its value. */
export function parseAdaptiveOptions<Req>(options: AdaptiveConcurrencyOptions<Req> = {}): AdaptiveConfig<Req> {
  if (!isPlainObject(options)) throw invalidOption('adaptiveConcurrency', 'an options object', options)
  rejectUnknown('adaptiveConcurrency', options, KNOWN)
  const o: AdaptiveConcurrencyOptions<Req> = options
  const algorithm: LimitAlgorithmName = o.algorithm ?? 'gradient2'
  if (!['gradient2', 'aimd', 'vegas'].includes(algorithm as string))
    throw invalidOption('algorithm', '"gradient2", "aimd" or "vegas"', algorithm)
  const count = (name: string, value: unknown, fallback: number): number => {
    if (value === undefined) return fallback
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) throw invalidOption(name, 'a whole number ≥ 1', value)
    return value
  }
  const minLimit = count('minLimit', o.minLimit, 4)
  const maxLimit = count('maxLimit', o.maxLimit, 1000)
  if (maxLimit < minLimit) throw invalidOption('maxLimit', `a number ≥ minLimit (${minLimit})`, maxLimit)
  const initialLimit = count('initialLimit', o.initialLimit, Math.min(maxLimit, Math.max(minLimit, 20)))
  if (initialLimit < minLimit || initialLimit > maxLimit)
    throw invalidOption('initialLimit', `a number from minLimit to maxLimit`, initialLimit)
  const tolerance = o.tolerance ?? 1.2
  if (typeof tolerance !== 'number' || !(tolerance >= 1 && tolerance <= 10))
    throw invalidOption('tolerance', 'a number from 1 to 10', tolerance)
  const elu = o.eventLoopUtilization ?? 0.95
  if (elu !== false && (typeof elu !== 'number' || !(elu > 0 && elu <= 1)))
    throw invalidOption('eventLoopUtilization', 'a number in (0, 1], or false', elu)
  if (o.name !== undefined && (typeof o.name !== 'string' || o.name === '')) throw invalidOption('name', 'a non-empty string', o.name)
  if (o.meterProvider !== undefined && typeof (o.meterProvider as { getMeter?: unknown } | null)?.getMeter !== 'function')
    throw invalidOption('meterProvider', 'an OpenTelemetry MeterProvider', o.meterProvider)
  if (o.priority !== undefined && typeof o.priority !== 'function') throw invalidOption('priority', 'a function of the request', o.priority)
  return {
    gate: {
      algorithm,
      initialLimit,
      minLimit,
      maxLimit,
      tolerance,
      queueTimeoutMs: o.queueTimeout === undefined ? undefined : parseDuration('queueTimeout', o.queueTimeout),
      maxQueue: o.maxQueue === undefined ? undefined : count('maxQueue', o.maxQueue, 1),
      eventLoopUtilization: elu === false ? undefined : elu,
      intervalMs: o.interval === undefined ? 100 : parseDuration('interval', o.interval),
      baselineWindowMs: o.baselineWindow === undefined ? 30_000 : parseDuration('baselineWindow', o.baselineWindow),
      clock: Date.now,
    },
    priority: o.priority,
    name: o.name ?? 'default',
    meterProvider: o.meterProvider,
  }
}

/** The 503 of a shed request: problem details, the same shape as a 429's, with its class. */
export function shedBody(priority: Priority): string {
  return JSON.stringify({
    type: 'about:blank',
    title: 'Service Unavailable',
    status: 503,
    detail: `The service is at its capacity; ${priority} requests are being shed. Retry later.`,
  })
}
