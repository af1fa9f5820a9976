#!/usr/bin/env node
// Hot-path micro-benchmark: the cost of one request through Tollgate's response sequence (core's
// createGate: count, record, headers), in process, with no HTTP and no framework. It measures what
// the HTTP benchmark cannot separate from the server's own work: nanoseconds and bytes allocated per
// request, on the memory store (where the limiter is all there is).
//
//   node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 bench/hot-path.mjs [--baseline DIR] [--cycles N] [--ops N]
//
// Paths, interleaved over cycles (forward, then reverse):
//   one      one client, limit never reached (max 1e9 per 1 s)
//   many     10,000 clients round-robin, limit never reached
//   flood    one client over its limit (max 10 per 60 s): the refusal path
//   turnover 10,000 clients round-robin on a clock that advances 40 µs per request (25,000 requests
//            a second, as in the HTTP bench): ~40% of requests are a client's first in its 1 s window,
//            which `many` (millions of requests a second) almost never sees
// Bytes per request come from the heap growth over a slice run with no garbage collection in it (a
// large young generation, and a slice that saw a GC is measured again); it is what the request leaves
// for the collector, the decision included. With --baseline DIR, each path also runs against the
// @tollgate/core built in DIR, in the same cycles.
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { importFrom } from './lib/baseline.mjs'
import { median, slice } from './lib/slices.mjs'
import { CLIENTS } from './lib/stats.mjs'

const { values } = parseArgs({
  options: {
    baseline: { type: 'string' },
    cycles: { type: 'string', default: '6' },
    ops: { type: 'string', default: '200000' },
    help: { type: 'boolean', short: 'h' },
  },
})
if (values.help) {
  console.log(
    'usage: node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 bench/hot-path.mjs [--baseline DIR] [--cycles N] [--ops N]',
  )
  process.exit(0)
}
const CYCLES = Number(values.cycles)
const OPS = Number(values.ops)

/** A framework-shaped request and response: the IP is a property, headers go into a plain object. */
function makeIO() {
  return {
    record(req, _res, decision) {
      req.rateLimit = decision
      if (req.rateLimits === undefined) req.rateLimits = [decision]
      else req.rateLimits.push(decision)
      return req.rateLimits
    },
    setHeaders(res, headers) {
      for (const name in headers) res.headers[name.toLowerCase()] = headers[name]
    },
    status(res, code) {
      res.statusCode = code
    },
    send(res, rejection) {
      res.body = rejection.body
    },
    raw: () => undefined,
    visit: () => true,
  }
}

/** The loop body: a new framework-shaped request and response per call, the clients of `path` in turn, given to `handle`. */
function requests(path, handle) {
  const ips = path === 'many' || path === 'turnover' ? CLIENTS : ['203.0.113.7']
  let i = 0
  return () => {
    const ip = ips[i]
    i = i + 1 === ips.length ? 0 : i + 1
    const req = { ip, rateLimit: undefined, rateLimits: undefined }
    const res = { headers: {}, statusCode: 200, body: undefined }
    return handle(req, res)
  }
}

async function build(core, adapter, path) {
  const { Limiter, MemoryStore } = core
  const options = path === 'flood' ? { max: 10, window: 60_000 } : { max: 1e9, window: 1000 }
  let now = Date.now()
  const clock = path === 'turnover' ? { clock: () => now } : {}
  const limiter = new Limiter({ ...options, ...clock, store: new MemoryStore({ sweepIntervalMs: 0, ...clock }) }, { ip: (req) => req.ip })
  const gate = adapter.createGate(limiter, makeIO())
  if (path !== 'turnover') return requests(path, (req, res) => gate(req, res, undefined))
  return requests(path, (req, res) => {
    now += 0.04
    return gate(req, res, undefined)
  })
}

/** The same request objects and nothing else: what the loop itself costs and allocates. */
const empty = (path) => requests(path, (req, res) => req !== res)

const tiers = [['current', await import('@tollgate/core'), await import('@tollgate/core/adapter')]]
if (values.baseline) {
  const { mod, dir } = await importFrom('@tollgate/core', values.baseline)
  tiers.push(['baseline', mod, await import(pathToFileURL(join(dir, 'dist', 'adapter.js')).href)])
}
const cases = []
for (const path of ['one', 'many', 'flood', 'turnover']) {
  cases.push({ id: `${path} empty loop`, run: empty(path) })
  for (const [tier, core, adapter] of tiers) cases.push({ id: `${path} ${tier}`, run: await build(core, adapter, path) })
}
for (const c of cases) for (let n = 0; n < 3; n++) await slice(c.run, OPS) // warm up: JIT and the windows' maps

const results = new Map(cases.map((c) => [c.id, []]))
for (let cycle = 0; cycle < CYCLES; cycle++) {
  const order = cycle % 2 === 0 ? cases : [...cases].reverse()
  for (const c of order) {
    results.get(c.id).push(await slice(c.run, OPS))
  }
}
console.log(`Hot path, ${OPS} requests per slice, median of ${CYCLES} cycles (min…max); bytes: heap growth per request, no GC in the slice`)
console.log('| case | ns/request | bytes/request |')
console.log('|---|--:|--:|')
for (const [id, rs] of results) {
  const ns = rs.map((r) => r.ns)
  const bytes = rs.map((r) => r.bytes)
  const f = (x) => x.toFixed(0)
  console.log(`| ${id} | ${f(median(ns))} (${f(Math.min(...ns))}…${f(Math.max(...ns))}) | ${f(median(bytes))} |`)
}
