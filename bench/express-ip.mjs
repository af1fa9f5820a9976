#!/usr/bin/env node
// The client address on Express, in process: one read of Express's `req.ip` getter against
// `expressIp` (what @tollgate/express reads), on requests made the way Express makes them (the app's
// `app.request` prototype, X-Forwarded-For from a proxy on loopback), for Express 5 and Express 4.
//
//   node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 bench/express-ip.mjs [--trust SETTING] [--cycles N] [--ops N]
//
// Cases, interleaved over cycles (forward, then reverse), each over the 10,000 clients of the HTTP
// bench round-robin: `header` reads the X-Forwarded-For header only (the loop's own cost), `req.ip`
// the getter, `expressIp` @tollgate/express's own read; every case checks the address it got. ns and bytes per
// read as in hot-path.mjs (heap growth over a slice with no GC in it).
import { createRequire } from 'node:module'
import { parseArgs } from 'node:util'
import { expressIp } from '@tollgate/express/internal'
import { median, slice } from './lib/slices.mjs'
import { CLIENTS } from './lib/stats.mjs'

const { values } = parseArgs({
  options: {
    trust: { type: 'string', default: 'loopback' },
    cycles: { type: 'string', default: '6' },
    ops: { type: 'string', default: '50000' },
    help: { type: 'boolean', short: 'h' },
  },
})
if (values.help) {
  console.log(
    'usage: node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 bench/express-ip.mjs [--trust SETTING] [--cycles N] [--ops N]',
  )
  process.exit(0)
}
const CYCLES = Number(values.cycles)
const OPS = Number(values.ops)
const TRUST = /^\d+$/.test(values.trust) ? Number(values.trust) : values.trust === 'true' ? true : values.trust

const require = createRequire(import.meta.url)

/** Requests as Express sets them up for the app (`setPrototypeOf(req, app.request)`), one per client. */
function requests(express) {
  const app = express()
  app.set('trust proxy', TRUST)
  const socket = { remoteAddress: '127.0.0.1' }
  return CLIENTS.map((ip) => {
    const req = Object.create(app.request)
    req.headers = { host: 'localhost', 'x-forwarded-for': ip }
    req.socket = socket
    return req
  })
}

function reader(reqs, read) {
  let k = 0
  return () => {
    const req = reqs[k]
    k = k === reqs.length - 1 ? 0 : k + 1
    if (read(req) !== CLIENTS[k === 0 ? reqs.length - 1 : k - 1]) throw new Error(`wrong address for client ${k}`)
  }
}

const cases = []
for (const [name, express] of [
  ['Express 5', require('express')],
  ['Express 4', require('express4')],
]) {
  const reqs = requests(express)
  cases.push({ id: `${name}, header`, run: reader(reqs, (req) => req.headers['x-forwarded-for']) })
  cases.push({ id: `${name}, req.ip`, run: reader(reqs, (req) => req.ip) })
  cases.push({ id: `${name}, expressIp`, run: reader(reqs, expressIp) })
}
for (const c of cases) for (let n = 0; n < 3; n++) await slice(c.run, OPS)

const results = new Map(cases.map((c) => [c.id, []]))
for (let cycle = 0; cycle < CYCLES; cycle++) {
  for (const c of cycle % 2 === 0 ? cases : [...cases].reverse()) results.get(c.id).push(await slice(c.run, OPS))
}
console.log(
  `Client address on Express, "trust proxy" ${JSON.stringify(TRUST)}, ${OPS} reads per slice, median of ${CYCLES} cycles (min…max); bytes: heap growth per read, no GC in the slice`,
)
console.log('| case | ns/read | bytes/read |')
console.log('|---|--:|--:|')
for (const [id, rs] of results) {
  const ns = rs.map((r) => r.ns)
  const f = (x) => x.toFixed(0)
  console.log(`| ${id} | ${f(median(ns))} (${f(Math.min(...ns))}…${f(Math.max(...ns))}) | ${f(median(rs.map((r) => r.bytes)))} |`)
}
