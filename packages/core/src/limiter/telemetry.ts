import { invalidOption, TollgateError } from '../errors'
import { hex, hmacSha256 } from '../hashes'
import type { Config } from '../options/parse-options'
import {
  type Decision,
  type DecisionSource,
  isThenable,
  type MaybePromise,
  type MeterLike,
  type MeterProviderLike,
  type MetricAttributes,
} from '../types'
import { DEBUG, debug } from './debug-log'
import type { StoreOperation, Telemetry } from './reporting'

type StoreOutcome = 'ok' | 'error' | 'timeout'

/** `tollgate.source` of each decision source: the names, and `deny_list` for a client on the deny list. */
const SOURCES: Record<DecisionSource, string> = {
  store: 'store',
  cache: 'cache',
  fallback: 'fallback',
  allow: 'allow',
  deny: 'deny',
  denyList: 'deny_list',
}

/** How often a limiter that follows the global MeterProvider looks whether one was registered or replaced (limiter clock ms). */
const LOOKUP_MS = 1000

/** What Tollgate uses of `@opentelemetry/api`. */
interface OtelApi {
  metrics: { getMeterProvider(): MeterProviderLike }
  createNoopMeter(): unknown
}

/**
 * `@opentelemetry/api`, an optional peer dependency: undefined while it loads (or before a limiter asked
 * for it), null when it is not installed.
 *
 * Why a dynamic `import()`: core ships as ESM and as CJS. ESM has no synchronous `require`;
 * `createRequire(import.meta.url)` cannot be written in the CJS build (nor under ts-jest); and
 * `createRequire(process.cwd() + '/')` resolves from wherever the process was started, not from where
 * @tollgate/core is installed, which is where a peer dependency is found. `import()` exists in both
 * builds, resolves from this file like any peer dependency, and fails softly when the package is
 * absent. Its one cost: decisions made in the milliseconds before it resolves are not recorded. An app
 * that wants every decision from the first one, or a provider other than the global one, passes
 * `meterProvider`, and then the API is not loaded at all.
 */
let api: OtelApi | null | undefined
let loading = false

function loadApi(): void {
  if (loading) return
  loading = true
  import('@opentelemetry/api').then(
    (m: OtelApi) => {
      api = typeof m.metrics?.getMeterProvider === 'function' && typeof m.createNoopMeter === 'function' ? m : null
    },
    () => {
      api = null
    },
  )
}

/** Keys in debug lines: an HMAC under a key drawn per process. Lines of one client can be followed, but a key (an IP: 2^32 guesses undo a plain hash) cannot be read back. */
let hmacKey: Uint8Array | undefined
function keyHash(key: string): string {
  hmacKey ??= crypto.getRandomValues(new Uint8Array(16))
  return hex(hmacSha256(hmacKey, key)).slice(0, 8)
}

function outcomeOf(error: unknown): StoreOutcome {
  return error instanceof TollgateError && error.code === 'TG_STORE_TIMEOUT' ? 'timeout' : 'error'
}

type Gauge = ReturnType<MeterLike['createObservableGauge']>
type GaugeCallback = Parameters<Gauge['addCallback']>[0]

interface Instruments {
  decisions: ReturnType<MeterLike['createCounter']>
  storeDuration: ReturnType<MeterLike['createHistogram']>
  degraded: Gauge
  observe: GaugeCallback
}

/**
 * The instruments of meter `tollgate`. The gauge's callback holds the telemetry weakly: a meter lives as
 * long as its provider, and must not keep every limiter ever made alive; once one is gone, its callback
 * takes itself off.
 */
function instrumentsOf(meter: MeterLike, telemetry: Metrics, prefix: string): Instruments {
  const decisions = meter.createCounter('tollgate.decisions', { description: 'Rate-limit decisions, by outcome, source and policy' })
  const storeDuration = meter.createHistogram('tollgate.store.duration', {
    description: 'Duration of the calls the limiter makes to its store',
    unit: 'ms',
    // The SDK's default buckets (0, 5, 10, 25... 10000) put every healthy call in the first one.
    advice: { explicitBucketBoundaries: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000] },
  })
  const degraded = meter.createObservableGauge('tollgate.store.degraded_nodes', {
    description: 'Store nodes whose circuit is open: their keys are decided by onStoreError until they answer again',
  })
  const ref = new WeakRef(telemetry)
  const attributes = { 'tollgate.prefix': prefix }
  const observe: GaugeCallback = (result) => {
    const t = ref.deref()
    if (t === undefined) degraded.removeCallback(observe)
    else result.observe(t.degradedNodes(), attributes)
  }
  degraded.addCallback(observe)
  return { decisions, storeDuration, degraded, observe }
}

/**
 * What a limiter tells the outside about its work: the `decision` event, OpenTelemetry metrics (meter
 * `tollgate`) and the `NODE_DEBUG=tollgate` log. Free when nothing wants them: a decision then pays one
 * comparison (`wake`) and a store call one branch (`timing`).
 *
 * Metrics go to the `meterProvider` option, or else to the global MeterProvider of `@opentelemetry/api`
 * when the API is installed. The API has no proxy for meters: a meter taken from it before an SDK
 * registers stays the no-op meter for good. So a limiter that follows the global provider looks at it
 * again at most once a second of its clock (on a decision, no timer), and records nothing while the
 * provider is the API's no-op one.
 */
export class Metrics implements Telemetry {
  /**
   * Decisions at or after this time (limiter clock) ask `wants`: -Infinity while anything
   * wants them, the next look at the global provider while only that is due, +Infinity when nothing is.
   */
  wake = Number.POSITIVE_INFINITY
  /** Store calls are timed: metrics are recorded, or the debug log is on. */
  timing = DEBUG
  /** Anything wants decisions: a `decision` listener, the debug log, or metrics. */
  private active = DEBUG
  private listening = false
  private instruments: Instruments | undefined
  private provider: MeterProviderLike | undefined
  /** When to look at the global provider next: +Infinity with a `meterProvider` option, or without the API. */
  private lookAt = Number.POSITIVE_INFINITY

  constructor(
    private readonly config: Config<unknown>,
    private readonly emit: (event: string, value?: unknown) => void,
    /** How many store nodes have an open circuit now (resilience.ts). */
    readonly degradedNodes: () => number,
  ) {
    const provider: unknown = config.meterProvider
    if (provider !== undefined && (provider === null || typeof (provider as Partial<MeterProviderLike>).getMeter !== 'function')) {
      throw invalidOption('meterProvider', 'an OpenTelemetry MeterProvider (an object with getMeter())', provider)
    }
    if (config.meterProvider !== undefined) this.use(config.meterProvider, undefined)
    else {
      loadApi()
      this.lookAt = Number.NEGATIVE_INFINITY
    }
    this.update()
  }

  /** Whether the limiter has `decision` listeners now. */
  listen(listening: boolean): void {
    this.listening = listening
    this.update()
  }

  /**
   * Called before a decision at `now` is made, when `now >= wake`: looks at the global provider if that
   * is due (before the store call, so the call is timed when a provider was just found), and says
   * whether the decision is to be reported.
   */
  wants(now: number): boolean {
    if (now >= this.lookAt) this.lookUp(now)
    return this.active
  }

  /** Reports a decision (once it is made, for a promise); returns it as it came. */
  decided(decision: MaybePromise<Decision>): MaybePromise<Decision> {
    return isThenable(decision) ? decision.then((d) => this.report(d)) : this.report(decision)
  }

  /** The start of a timed store call, or -1 when store calls are not timed. */
  start(): number {
    return this.timing ? performance.now() : -1
  }

  /** A store call's result; its duration and outcome are recorded when it settles (`started` ≥ 0, from `start`). */
  settle<T>(operation: StoreOperation, storeKey: string, started: number, result: MaybePromise<T>): MaybePromise<T> {
    if (!isThenable(result)) {
      this.stored(operation, storeKey, started, 'ok')
      return result
    }
    return result.then(
      (value) => {
        this.stored(operation, storeKey, started, 'ok')
        return value
      },
      (error: unknown) => {
        this.stored(operation, storeKey, started, outcomeOf(error))
        throw error
      },
    )
  }

  /** Calls the store (`call`), timed when store calls are: for calls off the counting path, where a closure costs nothing that matters. */
  timed<T>(operation: StoreOperation, storeKey: string, call: () => MaybePromise<T>): MaybePromise<T> {
    const started = this.start()
    if (started < 0) return call()
    try {
      return this.settle(operation, storeKey, started, call())
    } catch (error) {
      this.threw(operation, storeKey, started, error)
      throw error
    }
  }

  /** A timed store call that threw instead of returning. */
  threw(operation: StoreOperation, storeKey: string, started: number, error: unknown): void {
    this.stored(operation, storeKey, started, outcomeOf(error))
  }

  private stored(operation: StoreOperation, storeKey: string, started: number, outcome: StoreOutcome): void {
    const ms = performance.now() - started
    this.instruments?.storeDuration.record(ms, { 'tollgate.operation': operation, 'tollgate.outcome': outcome })
    if (DEBUG) {
      const node = this.config.store.nodeOf?.(storeKey) || '-'
      debug(`store ${operation} node=${node} duration=${ms.toFixed(3)}ms outcome=${outcome}`)
    }
  }

  private report(d: Decision): Decision {
    if (this.instruments !== undefined) {
      const outcome = d.denied === true ? 'denied' : d.shadowed === true ? 'shadowed' : d.allowed ? 'allowed' : 'limited'
      const attributes: MetricAttributes = {
        'tollgate.outcome': outcome,
        'tollgate.source': SOURCES[d.source],
        'tollgate.policy': d.policy.name,
      }
      this.instruments.decisions.add(1, attributes)
    }
    if (DEBUG) {
      debug(
        `decision key=${keyHash(d.key)} policy=${d.policy.name} count=${d.count} limit=${d.limit} remaining=${d.remaining} ` +
          `source=${d.source} allowed=${d.allowed}${d.shadowed === true ? ' shadowed' : ''}`,
      )
    }
    // Last: a listener that throws fails the request as a throwing `limited` listener does, but what
    // was counted is recorded first.
    if (this.listening) this.emit('decision', d)
    return d
  }

  /** Looks at the global MeterProvider: registered, replaced or gone since the last look. */
  private lookUp(now: number): void {
    if (api === undefined) return // still loading: look again at the next decision
    if (api === null) this.lookAt = Number.POSITIVE_INFINITY
    else {
      this.lookAt = now + LOOKUP_MS
      const provider = api.metrics.getMeterProvider()
      if (provider !== this.provider) this.use(provider, api.createNoopMeter())
    }
    this.update()
  }

  /** Takes the instruments from `provider`; none when its meter is `noop`, the API's no-op meter (no SDK registered). */
  private use(provider: MeterProviderLike, noop: unknown): void {
    if (this.instruments !== undefined) this.instruments.degraded.removeCallback(this.instruments.observe)
    this.instruments = undefined
    this.provider = provider
    const meter = provider.getMeter('tollgate')
    if (meter !== noop) this.instruments = instrumentsOf(meter, this, this.config.prefix)
  }

  private update(): void {
    const recording = this.instruments !== undefined
    this.timing = DEBUG || recording
    this.active = this.listening || this.timing
    this.wake = this.active ? Number.NEGATIVE_INFINITY : this.lookAt
  }
}
