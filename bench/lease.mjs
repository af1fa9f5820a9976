#!/usr/bin/env node
// Quota leasing (the `lease` option) under one hot key: --workers Express processes (node:cluster) share
// one key's quota through Redis, with a TCP delay proxy between them and Redis. See bench/README.md.
//
//   npm run bench -- lease            3 cycles (~4-5 min), writes bench/out/lease.{md,json}
//   npm run bench -- lease --quick    3 short cycles (~1.5 min)
//   npm run bench -- lease --help
//
// Two scenarios, each case's cluster started afresh for each, the cases interleaved over --cycles cycles
// (forward, then reverse):
//
// "hot": one client (every request the same key), a limit never reached (max 10,000,000 per 10 s). Cases:
//   tollgate-memory   the memory store in each process, no Redis: the latency reference;
//   tollgate-redis    RedisStore through the proxy, no lease;
//   tollgate-lease    RedisStore through the proxy, lease: true;
//   <peer>            the best peer on Redis through the proxy (rlf-redis, or --peer erl-redis), as the HTTP
//                     bench builds it (servers/express.mjs).
// Each case gets a paced slice (wrk/paced.lua: each connection pauses after an answer, so the servers
// are not saturated and the latency is what a request waits, not how long the queue is), then a
// saturating one (wrk -t1 -c50: req/s, and latency with a queue in it), each after --preload seconds of
// the same load, unmeasured (the servers idled while the other cases ran, and a lease idle for a second
// is given back: the slices measure a key that stays hot). Redis commands per request: the INFO
// commandstats delta of the case's own redis-server over the slice (commands run by scripts count) ÷
// requests. Writes to Redis per request: chunks the case's own proxy read from the app's connections
// over the slice ÷ requests (a round trip each, or fewer when the app pipelines).
//
// "reach": a limit the load passes (max 5,000 per 2 s window; the servers answer about twice that),
// tollgate-redis and tollgate-lease: per window that the load covered whole, the requests the
// workers admitted (counted by the window of the decision's own time) and Redis's count in the
// window's key (read just after the window ends). Admitted over max in any window fails the case.
//
// Pinning (≥ 2 cores): the servers on every core but the last, wrk, the redis-servers and the proxies
// on the last. Every process this starts is stopped by PID at the end, on an error and on Ctrl-C.
import { writeFileSync } from 'node:fs'
import os from 'node:os'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import { CASES } from './lib/cases.mjs'
import { BENCH_DIR, outBase, outHelp } from './lib/out.mjs'
import {
  canPin,
  checkTools,
  deadline,
  freePort,
  installSignalHandlers,
  pinned,
  shutdown,
  spawnTracked,
  startRedis,
  stopAll,
  stopChild,
  waitForLine,
} from './lib/procs.mjs'
import { median } from './lib/stats.mjs'
import { pooledPercentile, runWrk } from './lib/wrk.mjs'

const PEERS = ['rlf-redis', 'erl-redis']
const HELP = `Usage: npm run bench -- lease [options]      (or: node bench/lease.mjs [options])

Quota leasing under one hot key: --workers Express processes (node:cluster) behind one wrk, a TCP delay
proxy between them and Redis. Scenario "hot" (a limit never reached): tollgate-memory, tollgate-redis,
tollgate-lease and the best peer on Redis, each saturated and paced: req/s, p50/p99, Redis commands
and writes per request. Scenario "reach" (a limit the load passes): admitted per window against max,
tollgate-redis and tollgate-lease. See bench/README.md.

  --quick                3 cycles of short slices (~1.5 min)
  --cycles N             cycles, forward then reverse (default 3)
  --workers N            server processes per case (default 4)
  --slice S              seconds of each hot slice, saturated and paced (default 6; quick 2)
  --warmup S             seconds of load per cluster before its cycles (default 3; quick 1)
  --preload S            seconds of the same load, unmeasured, before each hot slice (default 1): the
                         other cases ran meanwhile, and a lease idle for a second was given back
  --connections N        wrk connections of the saturated slices (default 50)
  --paced-rate N         the paced slices' target requests/s, all workers together (default 1000)
  --paced-connections N  the paced slices' connections (default 10); each pauses connections/rate s
  --delay-ms MS          the proxy's delay, each direction (default 1)
  --peer ID              the peer on Redis: ${PEERS.join(' or ')} (default rlf-redis), or none
  --reach-max N          the reach scenario's max per window (default 5000)
  --reach-window-ms MS   its window (default 2000)
  --reach-slice S        seconds of each reach slice (default 9; quick 5)
  --scenarios LIST       hot,reach (default both)
  --max-minutes M        hard time limit (default 10; quick 4)
  ${outHelp('lease')}
  -h, --help
`

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    cycles: { type: 'string' },
    workers: { type: 'string', default: '4' },
    slice: { type: 'string' },
    warmup: { type: 'string' },
    preload: { type: 'string' },
    connections: { type: 'string', default: '50' },
    'paced-rate': { type: 'string', default: '1000' },
    'paced-connections': { type: 'string', default: '10' },
    'delay-ms': { type: 'string', default: '1' },
    peer: { type: 'string', default: 'rlf-redis' },
    'reach-max': { type: 'string', default: '5000' },
    'reach-window-ms': { type: 'string', default: '2000' },
    'reach-slice': { type: 'string' },
    scenarios: { type: 'string', default: 'hot,reach' },
    'max-minutes': { type: 'string' },
    out: { type: 'string', default: 'lease' },
    help: { type: 'boolean', short: 'h' },
  },
})
if (values.help) {
  process.stdout.write(HELP)
  process.exit(0)
}
const fail = (message) => {
  process.stderr.write(`lease.mjs: ${message} (--help lists the options)\n`)
  process.exit(2)
}
const quick = values.quick ?? false
const whole = (name, dflt, min) => {
  const v = values[name] ?? String(dflt)
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < min) fail(`--${name}: a whole number ≥ ${min}, not ${v}`)
  return n
}
const cfg = {
  quick,
  cycles: whole('cycles', 3, 1),
  workers: whole('workers', 4, 1),
  slice: whole('slice', quick ? 2 : 6, 1),
  warmup: whole('warmup', quick ? 1 : 3, 0),
  preload: whole('preload', 1, 0),
  connections: whole('connections', 50, 1),
  pacedRate: whole('paced-rate', 1000, 1),
  pacedConnections: whole('paced-connections', 10, 1),
  delayMs: Number(values['delay-ms']),
  peer: values.peer,
  reachMax: whole('reach-max', 5000, 1),
  reachWindowMs: whole('reach-window-ms', 2000, 100),
  reachSlice: whole('reach-slice', quick ? 5 : 9, 1),
  scenarios: values.scenarios.split(',').map((s) => s.trim()),
  maxMinutes: Number(values['max-minutes'] ?? (quick ? 4 : 10)),
  out: values.out,
}
if (!(cfg.delayMs >= 0)) fail(`--delay-ms: a number ≥ 0, not ${values['delay-ms']}`)
if (cfg.peer !== 'none' && !PEERS.includes(cfg.peer)) fail(`--peer: ${PEERS.join(', ')} or none, not ${cfg.peer}`)
if (!cfg.scenarios.length || cfg.scenarios.some((s) => s !== 'hot' && s !== 'reach'))
  fail(`--scenarios: hot, reach, not ${values.scenarios}`)
if (!(cfg.maxMinutes > 0)) fail(`--max-minutes: a positive number, not ${values['max-minutes']}`)
cfg.paceMs = Math.max(1, Math.round((cfg.pacedConnections / cfg.pacedRate) * 1000))

// The command line as given, for the report.
const COMMAND = `npm run bench -- lease${process.argv.length > 2 ? ` ${process.argv.slice(2).join(' ')}` : ''}`
const CPUS = os.availableParallelism()
const LOAD_CORE = CPUS - 1 // wrk, the redis-servers, the proxies
const SERVER_CORES = CPUS > 2 ? `0-${CPUS - 2}` : '0'
const SETTLE_MS = 300 // after wrk stops: the requests in flight finish, and their Redis calls with them
const HOT = { max: 10_000_000, windowMs: 10_000 }
const log = (s = '') => process.stderr.write(`${s}\n`)

// The memory and the leased case next to each other in every cycle's order, forward and reverse: their
// latencies are compared slice by slice, and the machine's state drifts less between neighbours.
const HOT_CASES = [
  { id: 'tollgate-memory', label: 'Tollgate, memory store (no Redis)', redis: false },
  { id: 'tollgate-lease', label: 'Tollgate, RedisStore, lease: true', redis: true },
  { id: 'tollgate-redis', label: 'Tollgate, RedisStore, no lease', redis: true },
  ...(cfg.peer === 'none' ? [] : [{ id: cfg.peer, label: CASES[cfg.peer].label, redis: true }]),
]
const REACH_CASES = HOT_CASES.filter((c) => c.id === 'tollgate-redis' || c.id === 'tollgate-lease')

// ---------------------------------------------------------------------------------------------
// Processes

/** Writes `word` on a child's stdin and resolves to the JSON of its `<WORD> {json}` answer. */
async function ask(child, word, name) {
  const answer = waitForLine(child, new RegExp(`^${word.toUpperCase()} (.*)$`), 10_000, name)
  child.stdin.write(`${word}\n`)
  return JSON.parse((await answer)[1])
}

/** The last lines a child wrote on stderr, kept for the report. */
function keepStderr(child) {
  const kept = { text: '' }
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (d) => {
    kept.text = (kept.text + d).slice(-4000)
  })
  return kept
}

/** A delay proxy in front of `redisPort`, pinned with the load: { port, url, child, stats() }. */
async function startProxy(redisPort) {
  const [cmd, args] = pinned(LOAD_CORE, process.execPath, [
    join(BENCH_DIR, 'lib', 'delay-proxy.mjs'),
    '--target-port',
    String(redisPort),
    '--delay-ms',
    String(cfg.delayMs),
  ])
  const child = spawnTracked('delay-proxy', cmd, args)
  const stderr = keepStderr(child)
  const m = await waitForLine(child, /^READY port=(\d+)/, 10_000, 'delay-proxy').catch((err) => {
    throw new Error(`${err.message}\n${stderr.text}`)
  })
  const port = Number(m[1])
  return { port, url: `redis://127.0.0.1:${port}`, child, stats: () => ask(child, 'stats', 'delay-proxy') }
}

/** For a Redis case: its own redis-server, its own proxy, and a direct client for INFO and the counts. */
async function startBackend() {
  const redis = await startRedis(LOAD_CORE)
  const proxy = await startProxy(redis.port)
  const { Redis } = await import('ioredis')
  const direct = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  direct.on('error', () => {})
  await direct.ping()
  return { redis, proxy, direct }
}

/** One case's cluster, pinned to the server cores, ready: { id, port, child, stderr }. */
async function startCluster(c, backend, { max, windowMs, prefix, count }) {
  const port = await freePort()
  const args = [
    join(BENCH_DIR, 'servers', 'cluster.mjs'),
    '--workers',
    String(cfg.workers),
    '--case',
    c.id,
    '--port',
    String(port),
    '--max',
    String(max),
    '--window-ms',
    String(windowMs),
    '--prefix',
    prefix,
  ]
  if (backend) args.push('--redis', backend.proxy.url)
  if (count) args.push('--count')
  const [cmd, argv] = canPin ? ['taskset', ['-c', SERVER_CORES, process.execPath, ...args]] : [process.execPath, args]
  const child = spawnTracked(`cluster/${c.id}`, cmd, argv, { cwd: BENCH_DIR, env: { ...process.env, NODE_ENV: 'production' } })
  const stderr = keepStderr(child)
  const line = await waitForLine(child, /^(READY|SKIP)\b ?(.*)$/, 60_000, `cluster/${c.id}`).catch((err) => {
    throw new Error(`${err.message}\n${stderr.text}`)
  })
  if (line[1] === 'SKIP') {
    await stopChild(child)
    throw new Error(`${c.id} cannot run: ${line[2]}`)
  }
  return { ...c, port, child, stderr, backend, prefix }
}

// ---------------------------------------------------------------------------------------------
// Measurements

function commandCalls(text) {
  const calls = {}
  for (const line of text.split('\n')) {
    const m = line.match(/^cmdstat_([^:]+):calls=(\d+)/)
    if (m) calls[m[1]] = Number(m[2])
  }
  return calls
}

/** Commands Redis ran between two INFO commandstats (the INFO calls themselves left out), by command and in all. */
function callsDelta(a, b) {
  const by = {}
  let total = 0
  for (const [cmd, n] of Object.entries(b)) {
    if (cmd === 'info') continue
    const d = n - (a[cmd] ?? 0)
    if (d > 0) {
      by[cmd] = d
      total += d
    }
  }
  return { total, by }
}

async function backendSnapshot(b) {
  if (!b) return undefined
  const [info, proxy] = await Promise.all([b.direct.info('commandstats'), b.proxy.stats()])
  return { calls: commandCalls(info), proxy }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** One wrk slice against a cluster, with the Redis side of it, after --preload seconds of the same load unmeasured. */
async function hotSlice(server, paced, cycle) {
  const load = (seconds) =>
    runWrk({
      port: server.port,
      seconds,
      connections: paced ? cfg.pacedConnections : cfg.connections,
      script: paced ? 'paced' : 'one',
      core: LOAD_CORE,
      env: { BENCH_PACE_MS: String(cfg.paceMs) },
    })
  if (cfg.preload > 0) await load(cfg.preload)
  const before = await backendSnapshot(server.backend)
  await ask(server.child, 'stats', `cluster/${server.id}`) // starts the limiter's time samples afresh
  const w = await load(cfg.slice)
  const { limiter } = await ask(server.child, 'stats', `cluster/${server.id}`)
  await sleep(SETTLE_MS)
  const after = await backendSnapshot(server.backend)
  const n = Math.max(1, w.requests)
  const r = {
    cycle,
    paced,
    requests: w.requests,
    rps: w.rps,
    p50: w.p50_us / 1000,
    p99: w.p99_us / 1000,
    p90: w.p90_us / 1000,
    p999: w.p999_us / 1000,
    quantiles: w.quantiles,
    non2xx: w.non2xx,
    socketErrors: w.socket_errors,
    // The limiter's own time per request in the servers, µs (servers/cluster.mjs).
    limiterP50: limiter?.p50 ?? null,
    limiterP99: limiter?.p99 ?? null,
    limiterP999: limiter?.p999 ?? null,
  }
  if (before) {
    const d = callsDelta(before.calls, after.calls)
    r.commands = d.total
    r.byCommand = d.by
    r.cmdPerReq = d.total / n
    r.writes = after.proxy.up - before.proxy.up
    r.writesPerReq = r.writes / n
    const held = after.proxy.held - before.proxy.held
    r.proxyHeldMs = held > 0 ? (after.proxy.heldMs - before.proxy.heldMs) / held : null
  }
  return r
}

/** Redis's count in window `w`'s key(s) under `prefix`, read at `at` (just after the window ends; the key outlives it). */
async function countAt(direct, prefix, w, at) {
  await sleep(Math.max(0, at - Date.now()))
  let cursor = '0'
  const keys = []
  do {
    const [next, found] = await direct.scan(cursor, 'MATCH', `${prefix}*:${w}`, 'COUNT', 1000)
    cursor = next
    keys.push(...found)
  } while (cursor !== '0')
  if (keys.length === 0) return null
  const counts = await direct.mget(...keys)
  return counts.reduce((sum, v) => sum + Number(v ?? 0), 0)
}

/** One slice of the reach scenario: admitted and counted per window the load covered whole. */
async function reachSlice(server, cycle) {
  const W = cfg.reachWindowMs
  const t0 = Date.now()
  // Windows that start once wrk is surely sending (200 ms after it is started) and end before it stops.
  const first = Math.ceil((t0 + 200) / W)
  const last = Math.floor((t0 + cfg.reachSlice * 1000) / W) - 1
  const counts = []
  for (let w = first; w <= last; w++) counts.push(countAt(server.backend.direct, server.prefix, w, (w + 1) * W + 150))
  const wr = await runWrk({ port: server.port, seconds: cfg.reachSlice, connections: cfg.connections, script: 'one', core: LOAD_CORE })
  const redisCounts = await Promise.all(counts)
  await sleep(SETTLE_MS)
  const { admitted, offered } = await ask(server.child, 'stats', `cluster/${server.id}`)
  const windows = []
  for (let w = first; w <= last; w++)
    windows.push({ window: w, offered: offered?.[w] ?? 0, admitted: admitted[w] ?? 0, redis: redisCounts[w - first] })
  return {
    cycle,
    requests: wr.requests,
    rps: wr.rps,
    refused: wr.non2xx,
    socketErrors: wr.socket_errors,
    p50: wr.p50_us / 1000,
    p99: wr.p99_us / 1000,
    windows,
  }
}

// ---------------------------------------------------------------------------------------------
// Run

const started = new Date()
const problems = [] // a case's failure: "**FAIL**" in the report, exit status 1

async function warm(server, seconds) {
  if (seconds > 0) await runWrk({ port: server.port, seconds, connections: cfg.connections, script: 'one', core: LOAD_CORE })
}

/** The cases in cycle `c`'s order: forward, then reverse. */
const ordered = (cases, c) => (c % 2 === 0 ? cases : [...cases].reverse())

async function runHot(backends) {
  const servers = []
  for (const c of HOT_CASES) {
    log(`hot: starting ${c.id} (${cfg.workers} workers)`)
    servers.push(await startCluster(c, backends[c.id], { ...HOT, prefix: `lease-bench:hot:${c.id}:`, count: true }))
  }
  for (const s of servers) await warm(s, cfg.warmup)
  const slices = Object.fromEntries(HOT_CASES.map((c) => [c.id, []]))
  for (let cycle = 0; cycle < cfg.cycles; cycle++) {
    for (const s of ordered(servers, cycle)) {
      // Paced first: after the other cases' turns a lease has been given back, and its rate estimate (a
      // running average over grants) starts from the paced load, not from a saturated slice just before.
      for (const paced of [true, false]) {
        const r = await hotSlice(s, paced, cycle)
        slices[s.id].push(r)
        log(
          `hot cycle ${cycle + 1}/${cfg.cycles} ${s.id.padEnd(16)} ${paced ? 'paced    ' : 'saturated'} ${Math.round(r.rps)
            .toString()
            .padStart(
              6,
            )} req/s  p50 ${r.p50.toFixed(3)}  p99 ${r.p99.toFixed(3)} ms${r.cmdPerReq === undefined ? '' : `  cmd/req ${r.cmdPerReq.toFixed(4)}  writes/req ${r.writesPerReq.toFixed(4)}`}`,
        )
        if (r.non2xx > 0 || r.socketErrors > 0)
          problems.push(
            `hot ${s.id}: ${r.non2xx} non-2xx and ${r.socketErrors} socket errors in cycle ${cycle + 1} (the limit is never reached)`,
          )
        if (s.child.exitCode !== null) throw new Error(`hot ${s.id}: the cluster exited:\n${s.stderr.text}`)
      }
    }
  }
  const output = Object.fromEntries(servers.filter((s) => s.stderr.text.trim()).map((s) => [s.id, s.stderr.text.trim()]))
  for (const s of servers) await stopChild(s.child)
  return { slices, output }
}

async function runReach(backends) {
  const servers = []
  for (const c of REACH_CASES) {
    log(`reach: starting ${c.id} (${cfg.workers} workers)`)
    const limit = { max: cfg.reachMax, windowMs: cfg.reachWindowMs }
    servers.push(await startCluster(c, backends[c.id], { ...limit, prefix: `lease-bench:reach:${c.id}:`, count: true }))
  }
  for (const s of servers) await warm(s, Math.min(cfg.warmup, 2))
  const slices = Object.fromEntries(REACH_CASES.map((c) => [c.id, []]))
  for (let cycle = 0; cycle < cfg.cycles; cycle++) {
    for (const s of ordered(servers, cycle)) {
      const r = await reachSlice(s, cycle)
      slices[s.id].push(r)
      log(
        `reach cycle ${cycle + 1}/${cfg.cycles} ${s.id.padEnd(16)} ${Math.round(r.rps)} req/s, admitted per window ${r.windows.map((w) => w.admitted).join(', ')} (Redis ${r.windows.map((w) => w.redis ?? '–').join(', ')}), max ${cfg.reachMax}`,
      )
      for (const w of r.windows)
        if (w.admitted > cfg.reachMax) problems.push(`reach ${s.id}: ${w.admitted} admitted in window ${w.window} (max ${cfg.reachMax})`)
      if (r.socketErrors > 0) problems.push(`reach ${s.id}: ${r.socketErrors} socket errors in cycle ${cycle + 1}`)
      if (s.child.exitCode !== null) throw new Error(`reach ${s.id}: the cluster exited:\n${s.stderr.text}`)
    }
  }
  const output = Object.fromEntries(servers.filter((s) => s.stderr.text.trim()).map((s) => [s.id, s.stderr.text.trim()]))
  for (const s of servers) await stopChild(s.child)
  return { slices, output }
}

/** Round trips to Redis, direct and through the proxy: median of 50 PINGs each, ms. */
async function pingTimes(b) {
  const { Redis } = await import('ioredis')
  const viaProxy = new Redis(b.proxy.url, { maxRetriesPerRequest: 1 })
  viaProxy.on('error', () => {})
  const time = async (client) => {
    const xs = []
    for (let i = 0; i < 50; i++) {
      const t = performance.now()
      await client.ping()
      xs.push(performance.now() - t)
    }
    return median(xs)
  }
  try {
    await viaProxy.ping()
    return { direct: await time(b.direct), proxy: await time(viaProxy) }
  } finally {
    viaProxy.disconnect()
  }
}

installSignalHandlers()
checkTools(['wrk', 'redis-server'])
deadline(cfg.maxMinutes, 'lease.mjs')
main().catch((err) => shutdown(1, `lease.mjs: ${err?.stack ?? err}`))

async function main() {
  log(
    `lease bench: ${cfg.workers} workers per case, ${cfg.cycles} cycles, proxy ${cfg.delayMs} ms each way; servers on core${SERVER_CORES.includes('-') ? 's' : ''} ${SERVER_CORES}, wrk and Redis on core ${LOAD_CORE}${canPin ? '' : ' (not pinned)'}`,
  )

  const backends = {}
  for (const c of HOT_CASES) if (c.redis) backends[c.id] = await startBackend()
  const ping = await pingTimes(Object.values(backends)[0])
  log(`PING round trip: direct ${ping.direct.toFixed(3)} ms, through the proxy ${ping.proxy.toFixed(3)} ms`)

  const results = {}
  if (cfg.scenarios.includes('hot')) results.hot = await runHot(backends)
  if (cfg.scenarios.includes('reach')) results.reach = await runReach(backends)
  const proxyHeld = []
  for (const b of Object.values(backends)) {
    const s = await b.proxy.stats()
    if (s.held > 0) proxyHeld.push({ mean: s.heldMs / s.held, max: s.maxHeldMs })
    b.direct.disconnect()
  }
  const minutes = (Date.now() - started.getTime()) / 60_000

  // ---------------------------------------------------------------------------------------------
  // Report

  const fmt = (x, d) => (x === undefined || x === null || Number.isNaN(x) ? '–' : x.toFixed(d))
  const int = (x) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–')
  const µs = (x) => (Number.isFinite(x) ? (Math.round(x * 10) / 10).toLocaleString('en-US') : '–')
  /** Median (min–max) of `xs`. */
  const spread = (xs, d, f = (x) => fmt(x, d)) => {
    const v = xs.filter((x) => x !== undefined && x !== null && !Number.isNaN(x))
    if (!v.length) return '–'
    return v.length === 1 ? f(v[0]) : `${f(median(v))} (${f(Math.min(...v))}–${f(Math.max(...v))})`
  }

  const md = []
  md.push('# Quota leasing under one hot key')
  md.push('')
  md.push(
    `\`${COMMAND}\` · ${started.toISOString().slice(0, 16)}Z · Node ${process.version} · ${os.cpus()[0]?.model?.trim() ?? 'cpu'}, ${CPUS} cores (servers on core${SERVER_CORES.includes('-') ? 's' : ''} ${SERVER_CORES}; wrk, the redis-servers and the proxies on core ${LOAD_CORE}${canPin ? '' : '; not pinned'}) · run took ${minutes.toFixed(1)} min`,
  )
  md.push('')
  const heldMean = proxyHeld.length ? median(proxyHeld.map((h) => h.mean)) : Number.NaN
  md.push(
    `Each case: ${cfg.workers} Express 5 processes (node:cluster) on one port, one wrk (-t1). Each Redis case has its own redis-server and its own TCP delay proxy (in node, 127.0.0.1), which holds every chunk at least ${cfg.delayMs} ms **in each direction** (a round trip gains at least ${2 * cfg.delayMs} ms; chunks were held ${fmt(heldMean, 2)} ms on average, Node's timers firing on whole milliseconds). PING round trip: ${fmt(ping.direct, 3)} ms direct, ${fmt(ping.proxy, 3)} ms through the proxy. ${cfg.cycles} cycles, the cases in turn (forward, then reverse); each cell is the median over cycles, (min–max).`,
  )
  md.push('')
  md.push(
    problems.length
      ? `**FAIL**:\n\n${problems.map((p) => `- ${p}`).join('\n')}`
      : 'Checks: every hot slice all 2xx with no socket errors; no window of the reach scenario admitted more than max.',
  )
  md.push('')

  const targets = []
  if (results.hot) {
    const S = results.hot.slices
    md.push(`## Hot key, a limit never reached (max ${HOT.max.toLocaleString('en-US')} per ${HOT.windowMs / 1000} s)`)
    md.push('')
    md.push(
      `Each slice follows ${cfg.preload} s of the same load, unmeasured: the case's servers idled while the other cases ran, and a lease idle for a second is given back and starts again from one unit; the slices measure a key that stays hot. Saturated: wrk -c${cfg.connections}, ${cfg.slice} s slices, as fast as the servers answer (the latency includes the queue). Paced: wrk -c${cfg.pacedConnections}, each connection pausing ${cfg.paceMs} ms after each answer (at most ${int((cfg.pacedConnections * 1000) / cfg.paceMs)} req/s), ${cfg.slice} s slices: the servers are not saturated, and the latency is what a request waits. Redis cmd/req: INFO commandstats delta of the case's redis-server over the slice ÷ requests (EVALSHA and each command a script runs count; the runner's INFO does not). Writes/req: chunks the case's proxy read from the app's connections over the slice ÷ requests: round trips, fewer when the app pipelines.`,
    )
    md.push('')
    md.push(
      '| case | req/s | p50 ms | p99 ms | Redis cmd/req | writes/req | paced req/s | paced p50 ms | paced p99 ms | paced cmd/req | paced writes/req | paced limiter p50 / p99 / p99.9 µs |',
    )
    md.push('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|')
    for (const c of HOT_CASES) {
      const sat = S[c.id].filter((r) => !r.paced)
      const pac = S[c.id].filter((r) => r.paced)
      const col = (rs, k, d) =>
        spread(
          rs.map((r) => r[k]),
          d,
        )
      md.push(
        `| ${c.id}: ${c.label} | ${spread(
          sat.map((r) => r.rps),
          0,
          int,
        )} | ${col(sat, 'p50', 3)} | ${col(sat, 'p99', 3)} | ${c.redis ? col(sat, 'cmdPerReq', 4) : '–'} | ${c.redis ? col(sat, 'writesPerReq', 4) : '–'} | ${spread(
          pac.map((r) => r.rps),
          0,
          int,
        )} | ${col(pac, 'p50', 3)} | ${col(pac, 'p99', 3)} | ${c.redis ? col(pac, 'cmdPerReq', 4) : '–'} | ${c.redis ? col(pac, 'writesPerReq', 4) : '–'} | ${µs(median(pac.map((r) => r.limiterP50)))} / ${µs(median(pac.map((r) => r.limiterP99)))} / ${µs(median(pac.map((r) => r.limiterP999)))} |`,
      )
    }
    md.push('')
    // The leasing targets: the leased case against the memory case, cycle by cycle.
    const byCycle = (id, paced) => S[id].filter((r) => r.paced === paced)
    if (S['tollgate-lease'] && S['tollgate-memory']) {
      for (const paced of [true, false]) {
        const L = byCycle('tollgate-lease', paced)
        const M = byCycle('tollgate-memory', paced)
        const d50 = L.map((r, i) => r.p50 - M[i].p50)
        const d99 = L.map((r, i) => r.p99 - M[i].p99)
        const cmd = L.map((r) => r.cmdPerReq)
        const what = paced ? 'paced' : 'saturated'
        targets.push({
          what: `Redis cmd/req ≤ 0.01 (${what})`,
          value: spread(cmd, 4),
          met: median(cmd) <= 0.01,
          all: Math.max(...cmd) <= 0.01,
        })
        targets.push({
          what: `p50 lease − memory ≤ 0.1 ms (${what})`,
          value: spread(d50, 3),
          met: median(d50) <= 0.1,
          all: Math.max(...d50) <= 0.1,
        })
        targets.push({
          what: `p99 lease − memory ≤ 0.3 ms (${what})`,
          value: spread(d99, 3),
          met: median(d99) <= 0.3,
          all: Math.max(...d99) <= 0.3,
        })
        if (paced && L.every((r) => r.quantiles) && M.every((r) => r.quantiles)) {
          // Every paced slice of a case taken together: a stall of the machine lands in one slice's
          // p99 and moves it by milliseconds, but is one of many in the pooled requests.
          const pooled = (runs, p) => pooledPercentile(runs, p) / 1000
          const p50 = pooled(L, 50) - pooled(M, 50)
          const p99 = pooled(L, 99) - pooled(M, 99)
          const fmt = (lease, memory) => `${(lease - memory).toFixed(3)} (${lease.toFixed(3)} − ${memory.toFixed(3)})`
          targets.push({
            what: 'p50 lease − memory ≤ 0.1 ms (paced, every cycle pooled)',
            value: fmt(pooled(L, 50), pooled(M, 50)),
            met: p50 <= 0.1,
            all: p50 <= 0.1,
          })
          targets.push({
            what: 'p99 lease − memory ≤ 0.3 ms (paced, every cycle pooled)',
            value: fmt(pooled(L, 99), pooled(M, 99)),
            met: p99 <= 0.3,
            all: p99 <= 0.3,
          })
        }
        // The same bounds on the limiter's own time in the servers, which the load generator's and the
        // machine's queues do not reach: what a request waits for its decision.
        const l50 = L.map((r, i) => (r.limiterP50 - M[i].limiterP50) / 1000)
        const l99 = L.map((r, i) => (r.limiterP99 - M[i].limiterP99) / 1000)
        targets.push({
          what: `limiter p50 lease − memory ≤ 0.1 ms (${what})`,
          value: spread(l50, 4),
          met: median(l50) <= 0.1,
          all: Math.max(...l50) <= 0.1,
        })
        targets.push({
          what: `limiter p99 lease − memory ≤ 0.3 ms (${what})`,
          value: spread(l99, 4),
          met: median(l99) <= 0.3,
          all: Math.max(...l99) <= 0.3,
        })
      }
      md.push('Targets, the leased case against the memory case in the same cycle, median (min–max) over cycles:')
      md.push('')
      md.push('| target | measured | met (median) | met (every cycle) |')
      md.push('|---|--:|---|---|')
      for (const t of targets) md.push(`| ${t.what} | ${t.value} | ${t.met ? 'yes' : '**no**'} | ${t.all ? 'yes' : 'no'} |`)
      md.push('')
    }
  }

  if (results.reach) {
    const S = results.reach.slices
    md.push(`## A limit the load passes (max ${cfg.reachMax.toLocaleString('en-US')} per ${cfg.reachWindowMs / 1000} s)`)
    md.push('')
    md.push(
      `wrk -c${cfg.connections}, ${cfg.reachSlice} s slices, as fast as the servers answer. Only windows the load covered whole count. Admitted: the requests the ${cfg.workers} workers let through, by the window of the decision's time (req.rateLimit.at). Redis's count: the window's key just after the window ended: without lease every request that reached Redis (refused ones too, until the over-limit cache refuses locally), with lease the units granted (net of units given back). Offered: the requests that reached the workers' limiters in the window, by arrival; a window offered less than max cannot admit max.`,
    )
    md.push('')
    md.push(
      '| case | windows | offered req/s | admitted per window | % of max | most in a window | Redis count per window | 429s | windows offered < max | admitted, windows offered ≥ max |',
    )
    md.push('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|')
    for (const c of REACH_CASES) {
      const ws = S[c.id].flatMap((r) => r.windows)
      const adm = ws.map((w) => w.admitted)
      const requests = S[c.id].reduce((s, r) => s + r.requests, 0)
      const refused = S[c.id].reduce((s, r) => s + r.refused, 0)
      md.push(
        `| ${c.id} | ${ws.length} | ${spread(
          S[c.id].map((r) => r.rps),
          0,
          int,
        )} | ${spread(adm, 0, int)} | ${spread(
          adm.map((a) => (100 * a) / cfg.reachMax),
          1,
        )} | ${int(Math.max(...adm))} | ${spread(
          ws.map((w) => w.redis),
          0,
          int,
        )} | ${requests ? ((100 * refused) / requests).toFixed(1) : '–'}% | ${ws.filter((w) => w.offered < cfg.reachMax).length} | ${spread(
          ws.filter((w) => w.offered >= cfg.reachMax).map((w) => w.admitted),
          0,
          int,
        )} |`,
      )
    }
    md.push('')
  }

  const output = {
    ...(results.hot?.output ?? {}),
    ...Object.fromEntries(Object.entries(results.reach?.output ?? {}).map(([k, v]) => [`reach ${k}`, v])),
  }
  if (Object.keys(output).length) {
    md.push('## Server output')
    md.push('')
    for (const [id, text] of Object.entries(output)) md.push(`${id}:\n\n\`\`\`\n${text.slice(-1500)}\n\`\`\`\n`)
  }

  const base = outBase(cfg.out)
  writeFileSync(`${base}.md`, `${md.join('\n')}\n`)
  writeFileSync(
    `${base}.json`,
    `${JSON.stringify({ command: COMMAND, date: started.toISOString(), node: process.version, cpus: CPUS, cfg, ping, proxyHeld, problems, targets, results }, null, 2)}\n`,
  )
  process.stdout.write(`${md.join('\n')}\n`)
  log(`wrote ${relative(process.cwd(), base)}.md and .json (${minutes.toFixed(1)} min)`)
  await stopAll()
  process.exit(problems.length ? 1 : 0)
}
