import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Worker } from 'node:worker_threads'
import type { AdaptiveConcurrencyOptions, AdaptiveGate, Priority } from '@tollgate/core/adapter'
import { adaptiveConcurrency as expressAdaptive } from '@tollgate/express'
import { adaptiveConcurrency as fastifyAdaptive } from '@tollgate/fastify'
import { adaptiveConcurrency as koaAdaptive } from '@tollgate/koa'
import express from 'express'
import Fastify from 'fastify'
import Koa from 'koa'

// The adaptive tests' servers and load over real HTTP on 127.0.0.1: each framework with adaptiveConcurrency in
// front of a handler, a request's class from its x-priority header, and an open-loop load generator in a worker
// thread (its own event loop, as a client in another process has: the gate's event-loop signal sees the server's).

/** A Node server of Express's or Koa's once it listens: its URL, and a close that ends its connections too. */
async function listening(server: Server): Promise<{ url: string; close: () => Promise<void> }> {
  await new Promise((r) => server.once('listening', r))
  const { port } = server.address() as AddressInfo
  const close = () => {
    server.closeAllConnections()
    return new Promise<void>((r) => server.close(() => r()))
  }
  return { url: `http://127.0.0.1:${port}`, close }
}

export type Serve = (
  options: AdaptiveConcurrencyOptions<never>,
  handle: (name: string) => Promise<void>,
) => Promise<{ url: string; gate: AdaptiveGate; close: () => Promise<void> }>

const priorityOf = (headers: Record<string, string | string[] | undefined>): Priority =>
  (headers['x-priority'] as Priority | undefined) ?? 'normal'

export const frameworks: Record<'express' | 'fastify' | 'koa', Serve> = {
  express: async (options, handle) => {
    const app = express()
    const mw = expressAdaptive({ ...options, priority: (req) => priorityOf(req.headers) })
    app.use(mw)
    app.get('/:name', async (req, res) => {
      await handle(req.params.name!)
      res.send('ok')
    })
    return { ...(await listening(app.listen(0, '127.0.0.1'))), gate: mw.gate }
  },
  fastify: async (options, handle) => {
    const app = Fastify({ forceCloseConnections: true })
    const hook = fastifyAdaptive({ ...options, priority: (request) => priorityOf(request.headers) })
    app.addHook('onRequest', hook)
    app.get<{ Params: { name: string } }>('/:name', async (request) => {
      await handle(request.params.name)
      return 'ok'
    })
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    return { url, gate: hook.gate, close: () => app.close() }
  },
  koa: async (options, handle) => {
    const app = new Koa()
    const mw = koaAdaptive({ ...options, priority: (ctx) => priorityOf(ctx.headers) })
    app.use(mw)
    app.use(async (ctx) => {
      await handle(ctx.path.slice(1))
      ctx.body = 'ok'
    })
    return { ...(await listening(app.listen(0, '127.0.0.1'))), gate: mw.gate }
  },
}

/**
 * A service of fixed capacity, as a database pool is: `capacity` requests at a time, each from 0.75 to 1.25 times
 * `meanMs` (a fixed pseudo-random sequence), the rest waiting inside it first come first served. It records how
 * long each request held its slot, so a test can say what it could serve from what it did.
 */
export function service(capacity: number, meanMs: number) {
  let running = 0
  const waiting: Array<() => void> = []
  let seed = 12345
  const held: number[] = []
  const serve = () =>
    new Promise<void>((resolve) => {
      const run = () => {
        running++
        seed = (seed * 1103515245 + 12345) % 2 ** 31
        const from = performance.now()
        setTimeout(
          () => {
            held.push(performance.now() - from)
            running--
            resolve()
            while (running < capacity && waiting.length > 0) waiting.shift()!()
          },
          meanMs * (0.75 + (seed % 11) / 20),
        )
      }
      if (running < capacity) run()
      else waiting.push(run)
    })
  return {
    serve,
    /** Requests a second it serves when busy: its capacity over the mean time a request held a slot. */
    perSecond: () => (capacity * 1000 * held.length) / held.reduce((a, b) => a + b, 0),
  }
}

/** One request of an offered load: when it was due (ms from the load's start), its latency from then, its answer (0: none). */
export interface Result {
  readonly due: number
  readonly ms: number
  readonly status: number
  readonly priority: Priority
}

/** The classes in turn: 20% critical, 50% normal, 30% sheddable, evenly spread. */
export const MIX: readonly Priority[] = [
  'critical',
  'normal',
  'sheddable',
  'normal',
  'sheddable',
  'normal',
  'critical',
  'normal',
  'sheddable',
  'normal',
]

// The worker: requests sent at a fixed rate whatever the answers (an open load: a server that falls behind is
// not excused by a client that waits for it), each latency counted from when the request was due, each request
// given up after giveUpMs. It ends when every request has an answer or was given up.
const LOAD = `
const { parentPort, workerData } = require('node:worker_threads')
const http = require('node:http')
const { host, port, path, steps, mix, giveUpMs } = workerData
const agent = new http.Agent({ keepAlive: true, maxSockets: 512 })
const results = []
const start = Date.now() + 50
let sent = 0, pending = 0, step = 0, stepStart = start, stepSent = 0, done = false
const finish = () => { agent.destroy(); parentPort.postMessage(results) }
const send = (due) => {
  const priority = mix[sent++ % mix.length]
  pending++
  let answered = false
  const settle = (status) => {
    if (answered) return
    answered = true
    results.push({ due: due - start, ms: Date.now() - due, status, priority })
    if (--pending === 0 && done) finish()
  }
  const req = http.request({ host, port, path, agent, headers: { 'x-priority': priority } }, (res) => {
    res.resume()
    res.on('end', () => settle(res.statusCode))
    res.on('error', () => settle(0))
  })
  req.on('error', () => settle(0))
  const timer = setTimeout(() => req.destroy(), giveUpMs)
  req.on('close', () => clearTimeout(timer))
  req.end()
}
const tick = () => {
  const now = Date.now()
  while (step < steps.length) {
    const { rate, ms } = steps[step]
    const owed = Math.floor((Math.min(now - stepStart, ms) * rate) / 1000)
    while (stepSent < owed) send(stepStart + (stepSent++ * 1000) / rate)
    if (now - stepStart < ms) break
    stepStart += ms
    stepSent = 0
    step++
  }
  if (step < steps.length) setTimeout(tick, 1)
  else {
    done = true
    if (pending === 0) finish()
  }
}
setTimeout(tick, Math.max(0, start - Date.now()))
`

/**
 * Offers `url` the load of `steps` one after another (`rate` requests a second for `ms` each), the classes in
 * MIX's order; resolves to every request's result, `due` counted from the first step's start.
 */
export async function offer(url: string, steps: Array<{ rate: number; ms: number }>, giveUpMs = 2000): Promise<Result[]> {
  const { hostname, port } = new URL(url)
  const worker = new Worker(LOAD, {
    eval: true,
    workerData: { host: hostname, port: Number(port), path: '/load', steps, mix: MIX, giveUpMs },
  })
  try {
    return await new Promise<Result[]>((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
      worker.once('exit', (code) => reject(new Error(`the load generator exited (${code}) before it answered`)))
    })
  } finally {
    await worker.terminate()
  }
}

export function quantile(xs: number[], q: number): number {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? Number.NaN
}

/**
 * The share of refusals that were in order: not a critical or normal request refused in a 100 ms span in which a
 * sheddable one was admitted (the overload bench's measure; bench/overload.mjs).
 */
export function shedInOrder(results: readonly Result[]): number {
  const refused = results.filter((r) => r.status !== 200)
  if (refused.length === 0) return 1
  const spans = new Set(results.filter((r) => r.status === 200 && r.priority === 'sheddable').map((r) => Math.floor(r.due / 100)))
  const misordered = refused.filter((r) => r.priority !== 'sheddable' && spans.has(Math.floor(r.due / 100))).length
  return 1 - misordered / refused.length
}
