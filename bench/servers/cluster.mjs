#!/usr/bin/env node
// One case's Express server as --workers processes behind one port (node:cluster), for the lease
// benchmark (bench/lease.mjs): the processes share one hot key's quota through Redis.
//
//   node bench/servers/cluster.mjs --workers 4 --case <case> --port <port> [--max N --window-ms MS --redis URL --prefix P] [--count]
//
// Each worker builds the case with servers/express.mjs: its app (buildApp) as the HTTP bench runs it, or
// with --count the same limiter (limiterFor) followed by a middleware that counts the requests it
// admitted per window, by the window of the decision's own time (Tollgate's req.rateLimit.at; the
// arrival time for a limiter that has no such field).
//
// The primary prints `READY <case> pid=<pid> workers=<pids>` once every worker listens (or `SKIP <why>`
// and exits 3 when the case's library is missing). Each `stats` line on its stdin is answered with
// `STATS {json}`: { admitted: { <window index>: n }, offered: (the same, every request that reached the limiter, by arrival) },
// summed over the workers, and with --count the
// limiter's own time per request since the last request, { n, p50, p99, p999 } in µs over every worker's samples. The workers' own output
// goes to the primary's stderr. The primary stops its workers by PID and exits when stdin ends (the
// runner went away) or on SIGTERM/SIGINT; a worker exits when its primary goes.
import cluster from 'node:cluster'
import { parseArgs } from 'node:util'
import { readRunner } from '../lib/runner-stdin.mjs'

const { values } = parseArgs({
  options: {
    workers: { type: 'string', default: '4' },
    case: { type: 'string' },
    port: { type: 'string' },
    max: { type: 'string', default: '1000000000' },
    'window-ms': { type: 'string', default: '1000' },
    redis: { type: 'string', default: '' },
    prefix: { type: 'string', default: 'bench:' },
    count: { type: 'boolean', default: false },
  },
})
const workers = Number(values.workers)
if (!values.case || !values.port || !(Number.isInteger(workers) && workers >= 1)) {
  process.stderr.write(
    'usage: node bench/servers/cluster.mjs --workers N --case <case> --port <port> [--max N --window-ms MS --redis URL --prefix P] [--count]\n',
  )
  process.exit(2)
}

/** Samples of the limiter's time a worker keeps between two stats requests. */
const MAX_TIMES = 200_000

/** The limiter's time per request over the workers' samples, in µs: { n, p50, p99, p999 }. */
function quantiles(times) {
  times.sort((a, b) => a - b)
  const at = (q) => (times.length === 0 ? null : Math.round(times[Math.min(times.length - 1, Math.floor(q * times.length))] * 10_000) / 10)
  return { n: times.length, p50: at(0.5), p99: at(0.99), p999: at(0.999) }
}

if (cluster.isPrimary) primary()
else await worker()

function primary() {
  // silent: the workers' stdin is not this process's (which carries the runner's requests).
  cluster.setupPrimary({ silent: true })
  const pending = new Map() // stats requests: id -> { left, admitted }
  let ready = 0
  let stopping = false
  let nextId = 0
  const stop = (code = 0) => {
    if (stopping) return
    stopping = true
    const all = Object.values(cluster.workers ?? {})
    for (const w of all) {
      try {
        process.kill(w.process.pid, 'SIGTERM')
      } catch {}
    }
    const exit = () => process.exit(code)
    if (all.every((w) => w.isDead())) return exit()
    cluster.on('exit', () => Object.values(cluster.workers ?? {}).every((w) => w.isDead()) && exit())
    setTimeout(exit, 3000).unref()
  }
  const pids = []
  for (let i = 0; i < workers; i++) {
    const w = cluster.fork()
    pids.push(w.process.pid)
    let out = ''
    w.process.stdout.setEncoding('utf8')
    w.process.stdout.on('data', (d) => {
      out += d
      for (let j = out.indexOf('\n'); j >= 0; j = out.indexOf('\n')) {
        const line = out.slice(0, j)
        out = out.slice(j + 1)
        if (line.startsWith('SKIP ') && ready < workers) {
          process.stdout.write(`${line}\n`)
          stop(3)
        } else process.stderr.write(`[worker ${w.process.pid}] ${line}\n`)
      }
    })
    w.process.stderr.pipe(process.stderr)
    w.on('message', (m) => {
      if (m?.ready && ++ready === workers) process.stdout.write(`READY ${values.case} pid=${process.pid} workers=${pids.join(',')}\n`)
      if (m?.stats) {
        const p = pending.get(m.id)
        if (p === undefined) return
        for (const [win, n] of Object.entries(m.stats)) p.admitted[win] = (p.admitted[win] ?? 0) + n
        for (const [win, n] of Object.entries(m.offered ?? {})) p.offered[win] = (p.offered[win] ?? 0) + n
        for (const t of m.times ?? []) p.times.push(t)
        if (--p.left === 0) {
          pending.delete(m.id)
          process.stdout.write(`STATS ${JSON.stringify({ admitted: p.admitted, offered: p.offered, limiter: quantiles(p.times) })}\n`)
        }
      }
    })
  }
  cluster.on('exit', (w, code, signal) => {
    if (stopping) return
    process.stderr.write(`worker ${w.process.pid} exited (${signal ?? code})\n`)
    stop(1)
  })
  readRunner(
    (line) => {
      if (line !== 'stats') return
      const id = nextId++
      const all = Object.values(cluster.workers ?? {})
      pending.set(id, { left: all.length, admitted: {}, offered: {}, times: [] })
      for (const w of all) w.send({ stats: true, id })
    },
    () => stop(0),
  )
  process.on('SIGTERM', () => stop(0))
  process.on('SIGINT', () => stop(0))
}

async function worker() {
  const { buildApp, limiterFor } = await import('./express.mjs')
  const { BODY } = await import('./common.mjs')
  const args = {
    caseName: values.case,
    port: Number(values.port),
    max: Number(values.max),
    windowMs: Number(values['window-ms']),
    redisUrl: values.redis,
    prefix: values.prefix,
  }
  const admitted = new Map() // window index -> requests admitted
  const offered = new Map() // window index -> requests that reached the limiter, by arrival
  const times = [] // ms the limiter took per admitted request, since the last stats request
  let app
  if (!values.count) app = await buildApp(args.caseName, args)
  else {
    const { default: express } = await import('express')
    app = express()
    app.set('trust proxy', 'loopback')
    const limiter = await limiterFor(args.caseName, args)
    // The limiter's own time per request, from entering its middleware to its next(): what a request
    // waits for the decision, apart from the load generator's and the machine's queues.
    if (limiter)
      app.use((req, res, next) => {
        const w = Math.floor(Date.now() / args.windowMs)
        offered.set(w, (offered.get(w) ?? 0) + 1)
        const t0 = performance.now()
        limiter(req, res, (err) => {
          if (times.length < MAX_TIMES) times.push(performance.now() - t0)
          next(err)
        })
      })
    app.use((req, _res, next) => {
      const at = typeof req.rateLimit?.at === 'number' ? req.rateLimit.at : Date.now()
      const w = Math.floor(at / args.windowMs)
      admitted.set(w, (admitted.get(w) ?? 0) + 1)
      next()
    })
    app.get('/', (_req, res) => {
      res.json(BODY)
    })
  }
  const server = app.listen(args.port, '127.0.0.1', (err) => {
    if (err) {
      process.stderr.write(`listen: ${err.message}\n`)
      process.exit(2)
    }
    process.send({ ready: true })
  })
  process.on('message', (m) => {
    if (m?.stats) {
      process.send({ stats: Object.fromEntries(admitted), offered: Object.fromEntries(offered), times: times.splice(0), id: m.id })
    }
  })
  process.on('disconnect', () => {
    server.close()
    process.exit(0)
  })
}
