import { unrefTimer } from '../timers'
import type { MeterLike, MeterProviderLike, MetricAttributes } from '../types'
import { type AdaptiveGate, PRIORITIES } from './gate'

/*
 * The gate's OpenTelemetry metrics (meter `tollgate`), all observed when the SDK collects, so a request
 * pays nothing for them: the limit, requests in flight and waiting, the latency signal and its baseline,
 * and refusals by class. Into the `meterProvider` option, or the global provider of `@opentelemetry/api`
 * once one is registered (looked for once a second, by a timer that never holds the process open).
 */

type Observer = (result: { observe(value: number, attributes?: MetricAttributes): void }) => void
type Observable = { addCallback(callback: Observer): void }
type WithCounters = MeterLike & { createObservableCounter?(name: string, options?: { description?: string; unit?: string }): Observable }

/** How often the global MeterProvider is looked at until one is registered. */
const LOOKUP_MS = 1000

export function observeGate(gate: AdaptiveGate, name: string, provider: MeterProviderLike | undefined): void {
  if (provider !== undefined) {
    register(gate, name, provider.getMeter('tollgate'))
    return
  }
  import('@opentelemetry/api').then(
    (api: { metrics: { getMeterProvider(): MeterProviderLike }; createNoopMeter(): unknown }) => {
      const noop = api.createNoopMeter()
      const look = (): boolean => {
        const meter = api.metrics.getMeterProvider().getMeter('tollgate')
        if (meter === noop) return false
        register(gate, name, meter)
        return true
      }
      if (look()) return
      const timer = setInterval(() => look() && clearInterval(timer), LOOKUP_MS)
      unrefTimer(timer)
    },
    () => undefined,
  )
}

function register(gate: AdaptiveGate, name: string, meter: WithCounters): void {
  const attributes = { 'tollgate.gate': name }
  const gauge = (metric: string, description: string, read: () => number, unit?: string) =>
    meter.createObservableGauge(metric, { description, ...(unit ? { unit } : {}) }).addCallback((r) => r.observe(read(), attributes))
  gauge('tollgate.adaptive.limit', 'The adaptive limit on requests in flight', () => gate.limit)
  gauge('tollgate.adaptive.inflight', 'Requests in flight through the gate', () => gate.inflight)
  gauge('tollgate.adaptive.queued', 'Requests waiting for a slot', () => gate.queueLength)
  gauge('tollgate.adaptive.latency', 'Mean latency of the last interval', () => gate.latencyMs, 'ms')
  gauge('tollgate.adaptive.baseline', 'The unloaded latency the limit is measured against', () => gate.baselineMs, 'ms')
  const shed =
    meter.createObservableCounter?.('tollgate.adaptive.shed', { description: 'Requests shed, by priority class' }) ??
    meter.createObservableGauge('tollgate.adaptive.shed', { description: 'Requests shed, by priority class' })
  shed.addCallback((r) => {
    for (const priority of PRIORITIES) r.observe(gate.shed[priority], { ...attributes, 'tollgate.priority': priority })
  })
}
