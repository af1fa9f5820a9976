// A Tollgate app that Prometheus can scrape: an Express API limited per client IP, a stricter login
// route, and OpenTelemetry's Prometheus exporter serving the limiter's metrics. Set REDIS_URL to count in
// Redis (the store latency and degraded-node panels need a store that can fail); without it, counts stay
// in memory.
//
//   npx tsx examples/monitoring/server.ts
//   PORT=3000 METRICS_PORT=9464 REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/monitoring/server.ts
//
// Then point Prometheus at http://127.0.0.1:9464/metrics (examples/prometheus/prometheus.yml) and import
// examples/grafana/tollgate.json into Grafana. test/docs/prometheus.test.ts runs this app under load
// against a real Prometheus.

import { PrometheusExporter } from '@opentelemetry/exporter-prometheus'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import { adaptiveConcurrency, MemoryStore, RedisStore, rateLimit, type Store } from '@tollgate/express'
import express from 'express'

const HOST = '127.0.0.1'
const port = Number(process.env.PORT ?? 3000)
const metricsPort = Number(process.env.METRICS_PORT ?? 9464)

async function store(): Promise<Store> {
  const url = process.env.REDIS_URL
  if (url === undefined) return new MemoryStore()
  const { Redis } = await import('ioredis')
  const client = new Redis(url, { maxRetriesPerRequest: 1 })
  client.on('error', (error: Error) => console.error(`Redis: ${error.message}`))
  return new RedisStore({ client })
}

async function main(): Promise<void> {
  // The exporter serves /metrics; passing its provider as `meterProvider` records from the first decision.
  const exporter = new PrometheusExporter({ host: HOST, port: metricsPort })
  const meterProvider = new MeterProvider({ readers: [exporter] })
  const shared = await store()

  const app = express()
  // The demo sits behind a proxy on this host: the client IP comes from X-Forwarded-For sent by loopback only.
  app.set('trust proxy', 'loopback')
  // The service's own protection first: it sheds the lowest class when the service is overloaded.
  app.use(adaptiveConcurrency({ name: 'api', meterProvider, priority: (req) => (req.path === '/login' ? 'critical' : 'normal') }))
  app.use(rateLimit({ max: 20, window: '1s', name: 'api', store: shared, meterProvider }))
  app.post('/login', rateLimit({ max: 5, window: '1m', name: 'login', prefix: 'tg:login:', store: shared, meterProvider }), (_req, res) => {
    res.json({ ok: true })
  })
  app.get('/', (req, res) => {
    res.json({ source: req.rateLimit?.source, remaining: req.rateLimit?.remaining })
  })
  const server = app.listen(port, HOST, () => {
    console.log(`Tollgate monitoring demo on http://${HOST}:${port}/, metrics on http://${HOST}:${metricsPort}/metrics`)
  })
  const stop = () => {
    server.close()
    void meterProvider.shutdown().finally(() => process.exit(0))
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

void main()
