#!/usr/bin/env node
// One server of the overload benchmark (bench/overload.mjs): a Fastify app whose handler has a fixed capacity, as a
// database pool has: CAPACITY requests at a time, each 15 to 25 ms, the rest waiting inside it first come first
// served; the capacity halves at HALVE_AT (epoch ms). In front of it, by CASE: nothing, a static cap on requests in
// flight, @fastify/under-pressure, or Tollgate's adaptiveConcurrency. It prints `listening <port>` when ready, and,
// for Tollgate, its gate's limit and requests in flight as JSON lines every 100 ms.
import Fastify from 'fastify'

const [, , CASE, PORT, CAPACITY, HALVE_AT] = process.argv
const capacity = () => (Date.now() >= Number(HALVE_AT) ? Number(CAPACITY) / 2 : Number(CAPACITY))
const app = Fastify({ logger: false })

let running = 0
const waiting = []
let seed = 12345
const serviceMs = () => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31
  return 15 + (seed % 11)
}
const work = () =>
  new Promise((resolve) => {
    const run = () => {
      running++
      setTimeout(() => {
        running--
        resolve()
        while (running < capacity() && waiting.length > 0) waiting.shift()()
      }, serviceMs())
    }
    if (running < capacity()) run()
    else waiting.push(run)
  })

if (CASE === 'static') {
  // A static cap at the first capacity: what a team sets once, from a load test.
  let inflight = 0
  app.addHook('onRequest', async (_request, reply) => {
    if (inflight >= Number(CAPACITY)) return reply.code(503).header('Retry-After', '1').send('busy')
    inflight++
    reply.raw.once('close', () => inflight--)
  })
} else if (CASE === 'under-pressure') {
  const { default: underPressure } = await import('@fastify/under-pressure')
  await app.register(underPressure, { maxEventLoopDelay: 100, maxEventLoopUtilization: 0.98, retryAfter: 1 })
} else if (CASE === 'tollgate') {
  const { adaptiveConcurrency } = await import('@tollgate/fastify')
  const hook = adaptiveConcurrency({ priority: (request) => request.headers['x-priority'] ?? 'normal' })
  app.addHook('onRequest', hook)
  setInterval(() => {
    const g = hook.gate
    process.stdout.write(
      `${JSON.stringify({ t: Date.now(), limit: g.limit, inflight: g.inflight, queued: g.queueLength, latency: g.latencyMs, baseline: g.baselineMs })}\n`,
    )
  }, 100).unref()
}

app.get('/', async () => {
  await work()
  return 'ok'
})

await app.listen({ port: Number(PORT), host: '127.0.0.1' })
process.stdout.write(`listening ${PORT}\n`)
process.on('SIGTERM', () => app.close().then(() => process.exit(0)))
