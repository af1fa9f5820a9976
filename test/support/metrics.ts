import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'

/** One data point as a test reads it: its attributes and its value (a number, or a histogram's count). */
export interface Point {
  attributes: Record<string, unknown>
  value: number
}

/**
 * An OpenTelemetry SDK MeterProvider with an in-memory exporter, read on demand: `read()` flushes the
 * reader and returns the data points of each metric the last export held (cumulative since the start).
 */
export class TestMetrics {
  readonly provider: MeterProvider
  private readonly exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  private readonly reader: PeriodicExportingMetricReader

  constructor() {
    // Exported only when read: the interval is longer than any test (and the SDK unrefs its timer).
    this.reader = new PeriodicExportingMetricReader({ exporter: this.exporter, exportIntervalMillis: 3_600_000 })
    this.provider = new MeterProvider({ readers: [this.reader] })
  }

  async read(): Promise<Map<string, Point[]>> {
    this.exporter.reset()
    await this.reader.forceFlush()
    const found = new Map<string, Point[]>()
    for (const resource of this.exporter.getMetrics())
      for (const scope of resource.scopeMetrics) {
        for (const metric of scope.metrics) {
          const points = (metric.dataPoints as DataPoint<number | Histogram>[]).map((p) => ({
            attributes: { ...p.attributes },
            value: typeof p.value === 'number' ? p.value : p.value.count,
          }))
          found.set(metric.descriptor.name, points)
        }
      }
    return found
  }

  /** The value of `metric`'s point whose attributes include `attributes` (0 when there is none), summed over such points. */
  async value(metric: string, attributes: Record<string, unknown>): Promise<number> {
    const points = (await this.read()).get(metric) ?? []
    return sumWhere(points, attributes)
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown()
  }
}

export function sumWhere(points: readonly Point[], attributes: Record<string, unknown>): number {
  let sum = 0
  for (const p of points) if (Object.entries(attributes).every(([k, v]) => p.attributes[k] === v)) sum += p.value
  return sum
}
