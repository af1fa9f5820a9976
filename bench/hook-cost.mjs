#!/usr/bin/env node
// Hook cost: what each memory-store limiter adds to one request, measured in process, through the
// framework's own request objects and hook machinery, with no socket I/O, no parser and no response
// written. The HTTP benchmark (run.mjs) measures a whole server, where one run's figure moves by
// several µs between server processes; this isolates the limiter's own work, so a difference of a
// few hundred ns between two limiters shows, cycle after cycle, in one process.
//
//   node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 bench/hook-cost.mjs [--frameworks LIST] [--cycles N] [--ops N] [--out NAME]
//
// Each case is the limiter exactly as the HTTP bench's servers build it (bench/servers/<framework>.mjs),
// applied again and again to a new request of the framework's own making (one real loopback request is
// held open to have a socket, a route and the app's settings):
//   fastify  the route's own Request and Reply classes, through fastify's onRequest hook runner
//            (fastify/lib/hooks.js)
//   express  an IncomingMessage and a ServerResponse handed to an app of the case's own through
//            app.handle, which sets them up (prototypes, res.locals) and runs its router, as a server does
//   koa      Koa's app.createContext over a new IncomingMessage and ServerResponse, the middleware
//            composed with a terminal one by koa-compose, as Koa composes it
// So each limiter meets each request for the first time, as in a server. `none` is the same loop with
// no limiter; every case is reported over it. The header fields are set but never serialised: that is
// the same work for every limiter writing the same fields (the floor's), and the HTTP bench's to see.
//
// Modes: one (the held request's own address, 127.0.0.1) and many (10,000 addresses round-robin in
// X-Forwarded-For, trusted as in the HTTP bench: the framework parses it on each run, in every case).
// Bytes per request: the heap's growth over a slice with no garbage collection in it (see hot-path.mjs).
import { writeFileSync } from 'node:fs'
import { IncomingMessage, request, ServerResponse } from 'node:http'
import { createRequire } from 'node:module'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import v8 from 'node:v8'
import { picks } from './lib/cases.mjs'
import { outBase, outHelp } from './lib/out.mjs'
import { CLIENTS, median } from './lib/stats.mjs'

const { values } = parseArgs({
  options: {
    frameworks: { type: 'string', default: 'fastify,express,koa' },
    cycles: { type: 'string', default: '6' },
    ops: { type: 'string', default: '100000' },
    cases: { type: 'string', default: '' },
    out: { type: 'string', default: 'hook-cost' },
    help: { type: 'boolean', short: 'h' },
  },
})
const USAGE =
  'usage: node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 bench/hook-cost.mjs [--frameworks fastify,express,koa] [--cases LIST] [--cycles N] [--ops N] [--out NAME]'
if (values.help) {
  console.log(`${USAGE}\n  ${outHelp('hook-cost')}`)
  process.exit(0)
}
if (typeof globalThis.gc !== 'function') {
  console.error(`hook-cost needs node's GC flags for its bytes per request.\n${USAGE}`)
  process.exit(2)
}
const CYCLES = Number(values.cycles)
const OPS = Number(values.ops)
const FRAMEWORKS = values.frameworks.split(',')
const BYTES_OPS = Math.min(OPS, 5000)
const ARGS = { max: 1e9, windowMs: 1000, prefix: 'bench:' }
const CASES = {
  fastify: ['none', 'floor', 'minimal', 'tollgate-memory', 'tollgate-memory-no-headers', 'frl-memory'],
  express: ['none', 'floor', 'minimal', 'tollgate-memory', 'tollgate-memory-no-headers', 'erl-memory', 'rlf-memory'],
  koa: ['none', 'floor', 'minimal', 'tollgate-memory', 'tollgate-memory-no-headers', 'krl-memory'],
}
// --cases: ids or prefixes to keep, as run.mjs reads them (`none` always runs: every figure is taken over it).
if (values.cases) {
  const wanted = values.cases.split(',')
  const ids = Object.values(CASES).flat()
  for (const fw in CASES) CASES[fw] = CASES[fw].filter((c) => c === 'none' || picks(wanted, c, ids))
}
const PEERS = { fastify: ['frl-memory'], express: ['erl-memory', 'rlf-memory'], koa: ['krl-memory'] }
const LIKE_FOR_LIKE = { 'rlf-memory': 'tollgate-memory-no-headers' }
const require = createRequire(join(process.cwd(), 'bench', 'hook-cost.cjs'))

/** Sends one GET to `port` and leaves it unanswered: the route handler holds the request. */
function holdOne(port) {
  const req = request({ host: '127.0.0.1', port, path: '/__hold', agent: false })
  req.on('error', () => {})
  req.end()
  return req
}

/** A new Node request on the held one's socket, with its headers (shared: "many" rewrites them per run). */
function newRequest(held) {
  const r = new IncomingMessage(held.socket)
  r.method = 'GET'
  r.url = '/__hold'
  r.headers = held.headers
  return r
}

/**
 * One framework: for each case, a `run(n, xff)` that applies the limiter to the held request n
 * times (resolving when the last has gone on), and a `close()`.
 */
async function setUp(framework) {
  const servers = await import(`./servers/${framework}.mjs`)
  const holders = []
  const cases = {}

  if (framework === 'fastify') {
    const { onRequestHookRunner } = require('fastify/lib/hooks.js')
    for (const name of CASES.fastify) {
      // Held in a hook that runs before the limiter's, so the request has not met the limiter yet.
      let got
      const held = new Promise((resolve) => {
        got = resolve
      })
      const hold = (request, reply) => {
        got({ request, reply })
        return new Promise(() => {})
      }
      const app = await servers.buildApp(name === 'none' ? 'bare' : name, ARGS, hold)
      app.get('/__hold', () => new Promise(() => {}))
      await app.listen({ port: 0, host: '127.0.0.1' })
      holders.push(holdOne(app.server.address().port))
      const { request: req, reply } = await held
      const context = Reflect.ownKeys(req).find((k) => typeof k === 'symbol' && k.description === 'fastify.context')
      if (req.routeOptions.url !== '/__hold') throw new Error(`fastify: the held request matched ${req.routeOptions.url}, not /__hold`)
      const hooks = req[context].onRequest.slice(1)
      if (hooks.length !== (name === 'none' ? 0 : 1)) throw new Error(`fastify ${name}: ${hooks.length} limiter hooks on the route`)
      // A request and reply of the route's own classes per run, as fastify makes them for each request.
      const route = req[context]
      const { id, params, raw, query, log } = req
      const apply = (done) => {
        const request = new route.Request(id, params, raw, query, log, route)
        onRequestHookRunner(hooks, request, new route.Reply(reply.raw, request, log), done)
      }
      cases[name] = await measurable(raw.headers, apply)
    }
  } else if (framework === 'express') {
    const app = await servers.buildApp('bare', ARGS)
    let got
    const held = new Promise((resolve) => {
      got = resolve
    })
    app.get('/__hold', (req, res) => got({ req, res }))
    const server = await new Promise((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s))
    })
    holders.push(holdOne(server.address().port))
    const { req } = await held
    // A request and response per run, handed to an app of the case's own through app.handle, as the
    // server hands each request: Express sets both objects up (prototypes, res.locals) and its router
    // adds its properties, so the limiter meets objects of a real request's shape. The app's last
    // middleware ends the run; `none` is an app with that one only.
    const express = createRequire(require.resolve('express'))('express')
    const failed = (error) => {
      throw error ?? new Error('express: a request fell through to the final handler')
    }
    for (const name of CASES.express) {
      const mw = name === 'none' ? null : await servers.limiterFor(name, ARGS)
      const caseApp = express()
      caseApp.set('trust proxy', 'loopback')
      if (mw !== null) caseApp.use(mw)
      let pending
      caseApp.use(() => {
        const done = pending
        pending = undefined
        done()
      })
      const apply = (done) => {
        const r = newRequest(req)
        pending = done
        caseApp.handle(r, new ServerResponse(r), failed)
      }
      cases[name] = await measurable(req.headers, apply)
    }
  } else if (framework === 'koa') {
    // koa-compose as Koa itself resolves it (a dependency of koa's, not of this bench).
    const compose = createRequire(require.resolve('koa'))('koa-compose')
    const app = await servers.buildApp('bare', ARGS)
    let got
    const held = new Promise((resolve) => {
      got = resolve
    })
    app.use((ctx) => {
      got(ctx)
      return new Promise(() => {})
    })
    const server = await new Promise((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s))
    })
    holders.push(holdOne(server.address().port))
    const ctx = await held
    for (const name of CASES.koa) {
      const mw = name === 'none' ? null : await servers.limiterFor(name, ARGS)
      const terminal = () => {}
      const fn = compose(mw === null ? [terminal] : [mw, terminal])
      // A context per run, from Koa's own createContext, over a new request and response.
      const apply = (done) => {
        const r = newRequest(ctx.req)
        fn(app.createContext(r, new ServerResponse(r))).then(() => done(), done)
      }
      cases[name] = await measurable(ctx.req.headers, apply)
    }
  }
  // The held requests never finish, so a server's close would wait on them: the servers are left to
  // the process's exit, their held connections dropped now.
  const close = () => {
    for (const h of holders) h.destroy()
  }
  return { cases, close }
}

/** `run(n, many)`: n applications of `apply`, each resolved before the next starts. */
async function measurable(headers, apply) {
  const run = (n, many) =>
    new Promise((resolve, reject) => {
      let i = 0
      let sync = false
      let finished = false
      let client = 0
      const next = (err) => {
        if (err) return reject(err)
        finished = true
        if (!sync) loop()
      }
      const loop = () => {
        while (i < n) {
          if (many) {
            headers['x-forwarded-for'] = CLIENTS[client]
            if (++client === CLIENTS.length) client = 0
          }
          finished = false
          sync = true
          i++
          apply(next)
          sync = false
          if (!finished) return
        }
        if (many) delete headers['x-forwarded-for']
        resolve()
      }
      loop()
    })
  return { run }
}

const results = []
const started = Date.now()
for (const framework of FRAMEWORKS) {
  if (!CASES[framework]) {
    console.error(`unknown framework ${framework}`)
    process.exit(2)
  }
  const { cases, close } = await setUp(framework)
  for (const mode of ['one', 'many']) {
    const many = mode === 'many'
    const names = CASES[framework]
    // Warm-up: every case, long enough for the JIT to settle.
    for (const name of names) await cases[name].run(OPS, many)
    const per = Object.fromEntries(names.map((n) => [n, { ns: [], bytes: [] }]))
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      const order = cycle % 2 === 0 ? names : [...names].reverse()
      for (const name of order) {
        const { ns, bytes } = await slice((n) => cases[name].run(n, many))
        per[name].ns.push(ns)
        per[name].bytes.push(bytes)
      }
    }
    const none = per.none
    for (const name of names) {
      const dns = per[name].ns.map((x, c) => x - none.ns[c])
      const dbytes = per[name].bytes.map((x, c) => x - none.bytes[c])
      results.push({
        framework,
        mode,
        case: name,
        ns: median(per[name].ns),
        overNs: median(dns),
        overNsMin: Math.min(...dns),
        overNsMax: Math.max(...dns),
        overBytes: median(dbytes),
        cyclesNs: per[name].ns,
        cyclesBytes: per[name].bytes,
      })
    }
    // Tollgate ÷ each peer, per cycle (over none): below 1 means Tollgate adds less. A peer that writes
    // no quota fields is compared with Tollgate writing none either.
    for (const peer of PEERS[framework]) {
      const ours = LIKE_FOR_LIKE[peer] ?? 'tollgate-memory'
      if (!per[peer] || !per[ours]) continue
      const t = per[ours].ns.map((x, c) => x - none.ns[c])
      const p = per[peer].ns.map((x, c) => x - none.ns[c])
      const ratios = t.map((x, c) => x / p[c])
      const r = results.find((x) => x.framework === framework && x.mode === mode && x.case === peer)
      r.against = ours
      r.tollgateOverPeer = median(ratios)
      r.cyclesTollgateCheaper = ratios.filter((x) => x < 1).length
    }
    console.error(`${framework} ${mode}: done (${((Date.now() - started) / 1000).toFixed(0)} s)`)
  }
  close()
}

/**
 * One timed run of `run(OPS)`, then the bytes per request of a short run with no garbage collection
 * in it (tried again when one fell inside it; NaN after five tries).
 */
async function slice(run) {
  globalThis.gc()
  await new Promise((resolve) => setImmediate(resolve))
  const t0 = process.hrtime.bigint()
  await run(OPS)
  const ns = Number(process.hrtime.bigint() - t0) / OPS
  for (let attempt = 0; attempt < 5; attempt++) {
    globalThis.gc()
    await new Promise((resolve) => setImmediate(resolve))
    const profiler = new v8.GCProfiler()
    profiler.start()
    const heap = v8.getHeapStatistics().used_heap_size
    await run(BYTES_OPS)
    const bytes = (v8.getHeapStatistics().used_heap_size - heap) / BYTES_OPS
    if (profiler.stop().statistics.length === 0) return { ns, bytes }
  }
  return { ns, bytes: Number.NaN }
}

const LABELS = {
  none: 'none (the loop, no limiter)',
  floor: 'floor: the same headers, no limiter logic',
  minimal: 'minimal: the floor plus a per-client count',
  'tollgate-memory': '**Tollgate, memory**',
  'tollgate-memory-no-headers': 'Tollgate, memory, `headers: false`',
  'frl-memory': '@fastify/rate-limit, memory',
  'erl-memory': 'express-rate-limit, memory',
  'rlf-memory': 'rate-limiter-flexible, memory (no headers: its README middleware)',
  'krl-memory': 'koa-ratelimit, memory',
}
const lines = [
  '# Hook cost: what each memory-store limiter adds to one request, in process',
  '',
  `\`node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 bench/hook-cost.mjs${values.frameworks !== 'fastify,express,koa' ? ` --frameworks ${values.frameworks}` : ''}${values.cases ? ` --cases ${values.cases}` : ''} --cycles ${CYCLES} --ops ${OPS}\`, node ${process.version}, ${new Date().toISOString().slice(0, 10)}. ns and bytes per request over \`none\` (the same loop with no limiter), median of ${CYCLES} interleaved cycles (min…max); Tollgate ÷ peer: median of the per-cycle ratios of the two added costs, and in how many cycles Tollgate added less. See the header of bench/hook-cost.mjs for what runs.`,
  '',
]
for (const framework of FRAMEWORKS) {
  for (const mode of ['one', 'many']) {
    lines.push(`## ${framework}, ${mode === 'one' ? 'one client' : '10,000 clients'}`, '')
    lines.push('| case | ns/req | + ns over none | + bytes over none | Tollgate ÷ peer, cycles Tollgate cheaper |', '|---|--:|--:|--:|--:|')
    for (const r of results.filter((x) => x.framework === framework && x.mode === mode)) {
      const over = r.case === 'none' ? '–' : `${r.overNs.toFixed(0)} (${r.overNsMin.toFixed(0)}…${r.overNsMax.toFixed(0)})`
      const bytes = r.case === 'none' || Number.isNaN(r.overBytes) ? '–' : r.overBytes.toFixed(0)
      const vs =
        r.tollgateOverPeer === undefined
          ? ''
          : `${r.tollgateOverPeer.toFixed(2)}, ${r.cyclesTollgateCheaper} of ${CYCLES}${r.against === 'tollgate-memory' ? '' : ' (against `headers: false`)'}`
      lines.push(`| ${LABELS[r.case] ?? r.case} | ${r.ns.toFixed(0)} | ${over} | ${bytes} | ${vs} |`)
    }
    lines.push('')
  }
}
const md = lines.join('\n')
const base = outBase(values.out)
writeFileSync(`${base}.md`, md)
writeFileSync(`${base}.json`, `${JSON.stringify({ cycles: CYCLES, ops: OPS, node: process.version, results }, null, 1)}\n`)
console.log(md)
console.error(`wrote ${relative(process.cwd(), base)}.md and .json in ${((Date.now() - started) / 1000).toFixed(0)} s`)
process.exit(0)
