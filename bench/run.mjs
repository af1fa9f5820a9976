#!/usr/bin/env node
// Tollgate HTTP benchmark: bare server vs Tollgate vs the peer libraries, per framework, in three
// modes, with wrk. See bench/README.md for what is measured and how to read the table.
//
//   npm run bench                       full run (~17 min): rewrites bench/RESULTS.{md,json} and the charts
//   npm run bench -- --quick            development run (~2-3 min), to bench/out/
//   npm run bench -- --help             all knobs, and the other benchmarks (npm run bench -- store, ...)
import { execFile } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import os from 'node:os'
import { basename, dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { describeTree, inside } from './lib/baseline.mjs'
import { baseOf, CASES, caseInfo, FRAMEWORKS, MODES, picks, withTwins } from './lib/cases.mjs'
import { renderCharts } from './lib/chart.mjs'
import { outBase } from './lib/out.mjs'
import {
  canPin,
  checkTools,
  cpuMicros,
  cpuTimes,
  deadline,
  freePort,
  installSignalHandlers,
  ipisTo,
  pinned,
  shutdown,
  spawnTracked,
  startRedis,
  stopChild,
  waitForLine,
} from './lib/procs.mjs'
import { renderMarkdown } from './lib/report.mjs'
import { runSubcommand, SUBCOMMANDS, subcommandHelp } from './lib/subcommands.mjs'
import { runWrk } from './lib/wrk.mjs'

const BENCH_DIR = dirname(fileURLToPath(import.meta.url))
const ROOT = join(BENCH_DIR, '..')
const SERVER_CORE = 0
const LOAD_CORE = 1 // wrk and redis-server
const SETTLE_MS = 100

// ---------------------------------------------------------------------------------------------
// Configuration: defaults < --quick < environment < command line.

const HELP = `Usage: npm run bench -- [options]      (or: node bench/run.mjs [options])
       npm run bench -- <benchmark> [its options]     (each takes --help)

The HTTP benchmark: every case's server driven by wrk, interleaved with a bare server of the same
framework (see bench/README.md). A full run rewrites the results page, bench/RESULTS.md, with
RESULTS.json and RESULTS-<framework>.svg; any other run writes to bench/out/, which git ignores.


  --quick                 development run: 2 cycles of 1 s slices (~2-3 min)      BENCH_QUICK=1
  --cycles N              measurement cycles (default 5; alternately forward/reverse)  BENCH_CYCLES
  --runs N                pooled runs (default 1): the whole bench N times over, every server started
                          afresh each run, and each cell summarised over the cycles of all runs
                          (a process's JIT and memory layout vary from start to start)  BENCH_RUNS
  --slice S               seconds per wrk slice, whole seconds (default 2)        BENCH_SLICE
  --warmup S              seconds of warm-up per server before the cycles (default 3)  BENCH_WARMUP
  --warmup-parallel       warm all servers of a group at once (default with --quick)  BENCH_WARMUP_PARALLEL=1
  --connections N         wrk connections (default 50; one wrk thread)            BENCH_CONNECTIONS
  --clients N             distinct X-Forwarded-For addresses in "many" mode (default 10000)  BENCH_CLIENTS
  --frameworks LIST       comma list of: ${Object.keys(FRAMEWORKS).join(', ')}      BENCH_FRAMEWORKS
  --modes LIST            comma list of: ${Object.keys(MODES).join(', ')}            BENCH_MODES
  --cases LIST            comma list of case ids or prefixes (bare is always kept),
                          e.g. tollgate or erl-redis,frl; an id keeps that case
                          alone (minimal is not also minimal-redis)               BENCH_CASES
  --listed-order          run a group's servers in the order --cases lists them (bare first), not
                          the framework's: a case then takes another place in the forward/reverse
                          cycles, to check what the place does to it           BENCH_LISTED_ORDER=1
  --out NAME              writes NAME.md, NAME.json and NAME-<framework>.svg in bench/out/, which
                          git ignores (a path with a / is used as given). Default: the results
                          page, bench/RESULTS; with --quick bench/out/RESULTS-quick, and with
                          --frameworks, --modes or --cases narrowing the run bench/out/RESULTS-focus  BENCH_OUT
  --max-minutes M         hard time limit for the whole run (default 25 per run; quick 8)  BENCH_MAX_MINUTES
  --baseline DIR          before/after: also run every Tollgate case with Tollgate built in DIR
                          (another checkout, npm ci + npm run build done there), as
                          <case>@base, in the same cycles; keeps floor; adds a
                          "Before -> after" table of Tollgate/floor per cell         BENCH_BASELINE
  --list                  print the cases and exit
  -h, --help

Cases: ${Object.entries(FRAMEWORKS)
  .map(([fw, cs]) => `\n  ${fw.padEnd(8)} ${cs.join(', ')}`)
  .join('')}

Other benchmarks (npm run bench -- <name> [options]; each script also runs on its own):
${subcommandHelp()}
`

function config() {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      cycles: { type: 'string' },
      runs: { type: 'string' },
      slice: { type: 'string' },
      warmup: { type: 'string' },
      'warmup-parallel': { type: 'boolean' },
      connections: { type: 'string' },
      clients: { type: 'string' },
      frameworks: { type: 'string' },
      modes: { type: 'string' },
      cases: { type: 'string' },
      'listed-order': { type: 'boolean' },
      out: { type: 'string' },
      'max-minutes': { type: 'string' },
      baseline: { type: 'string' },
      list: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  })
  if (values.help) {
    process.stdout.write(HELP)
    process.exit(0)
  }
  if (values.list) {
    for (const [fw, cs] of Object.entries(FRAMEWORKS)) {
      for (const c of cs) process.stdout.write(`${fw.padEnd(8)} ${c.padEnd(16)} ${CASES[c].label}\n`)
    }
    process.exit(0)
  }
  const env = process.env
  const truthy = (v) => ['1', 'true', 'yes'].includes(String(v).toLowerCase())
  const quick = values.quick ?? truthy(env.BENCH_QUICK ?? '')
  const pick = (cli, envName, dflt) => cli ?? env[envName] ?? dflt
  const int = (v, name, min) => {
    const n = Number(v)
    if (!Number.isInteger(n) || n < min) {
      process.stderr.write(`${name} must be a whole number >= ${min}, got ${v}\n`)
      process.exit(2)
    }
    return n
  }
  const list = (v, allowed, name) => {
    const items = String(v)
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
    const bad = items.filter((i) => !allowed.includes(i))
    if (bad.length) {
      process.stderr.write(`unknown ${name}: ${bad.join(', ')} (choose from ${allowed.join(', ')})\n`)
      process.exit(2)
    }
    return items
  }
  const cfg = {
    quick,
    cycles: int(pick(values.cycles, 'BENCH_CYCLES', quick ? 2 : 5), '--cycles', 1),
    runs: int(pick(values.runs, 'BENCH_RUNS', 1), '--runs', 1),
    slice: int(pick(values.slice, 'BENCH_SLICE', quick ? 1 : 2), '--slice', 1),
    warmup: int(pick(values.warmup, 'BENCH_WARMUP', quick ? 2 : 3), '--warmup', 0),
    warmupParallel: values['warmup-parallel'] ?? (env.BENCH_WARMUP_PARALLEL ? truthy(env.BENCH_WARMUP_PARALLEL) : quick),
    connections: int(pick(values.connections, 'BENCH_CONNECTIONS', 50), '--connections', 1),
    clients: int(pick(values.clients, 'BENCH_CLIENTS', 10000), '--clients', 2),
    frameworks: list(pick(values.frameworks, 'BENCH_FRAMEWORKS', Object.keys(FRAMEWORKS).join(',')), Object.keys(FRAMEWORKS), 'framework'),
    modes: list(pick(values.modes, 'BENCH_MODES', Object.keys(MODES).join(',')), Object.keys(MODES), 'mode'),
    casesFilter: (pick(values.cases, 'BENCH_CASES', '') || '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    listedOrder: values['listed-order'] ?? truthy(env.BENCH_LISTED_ORDER ?? ''),
    out: '',
    page: false,
    maxMinutes: 0,
  }
  // The results page is what a full run writes; a quick or narrowed run must not replace it with its smaller table.
  const narrowed =
    cfg.casesFilter.length > 0 || cfg.frameworks.length < Object.keys(FRAMEWORKS).length || cfg.modes.length < Object.keys(MODES).length
  cfg.out = pick(values.out, 'BENCH_OUT', '')
  if (!cfg.out) {
    cfg.page = !quick && !narrowed
    cfg.out = quick ? 'RESULTS-quick' : narrowed ? 'RESULTS-focus' : 'RESULTS'
  }
  cfg.maxMinutes = Number(pick(values['max-minutes'], 'BENCH_MAX_MINUTES', (quick ? 8 : 25) * cfg.runs))
  const baseline = pick(values.baseline, 'BENCH_BASELINE', '')
  if (baseline) {
    const dir = resolve(baseline)
    if (!existsSync(join(dir, 'package.json'))) {
      process.stderr.write(`--baseline ${baseline}: no package.json in ${dir} (want a Tollgate checkout, built)\n`)
      process.exit(2)
    }
    cfg.baseline = dir
  }
  return cfg
}

/**
 * The cases of a framework, filtered; with a baseline, floor is always kept and each Tollgate case has its twin.
 * With `listed`, in the order `filter` names them (bare first; the cases one prefix names keep the framework's
 * order among themselves, and a case kept but not named goes after bare).
 */
function casesOf(fw, filter, baseline, listed = false) {
  // An optional case runs only when named exactly (a prefix that names it, such as tollgate, does not).
  const all = FRAMEWORKS[fw].filter((c) => !CASES[c].optional || filter.includes(c))
  if (!filter.length) return baseline ? withTwins(all) : all
  const keep = baseline ? ['bare', 'floor'] : ['bare']
  const picked = all.filter((c) => keep.includes(c) || picks(filter, c, Object.keys(CASES)))
  if (listed) {
    const place = (c) => (c === 'bare' ? -1 : filter.findIndex((w) => picks([w], c, Object.keys(CASES))))
    picked.sort((a, b) => place(a) - place(b)) // stable: ties keep the framework's order
  }
  return baseline ? withTwins(picked) : picked
}

// ---------------------------------------------------------------------------------------------
// Helpers

const log = (s = '') => process.stderr.write(`${s}\n`)

function version(pkg) {
  try {
    return JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')).version
  } catch {
    return null
  }
}

/** Whether @tollgate/<fw> imports, and if not, a note saying why. Checked in a child process. */
function tollgateStatus(fw) {
  const name = `@tollgate/${fw}`
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const m = await import(${JSON.stringify(name)});
         const missing = ['rateLimit', 'RedisStore'].filter((k) => typeof m[k] !== 'function');
         if (missing.length) { console.error('MISSING ' + missing.join(' and ')); process.exit(3) }
         process.exit(0)`,
      ],
      { cwd: BENCH_DIR, timeout: 30_000 },
      (err, _out, stderr) => {
        if (!err) return resolve({ ok: true })
        const dist = join(ROOT, 'packages', fw, 'dist')
        const link = join(ROOT, 'node_modules', '@tollgate', fw)
        let why
        const missing = String(stderr).match(/^MISSING (.*)$/m)
        if (missing) why = `${name} does not export ${missing[1]} yet (packages/${fw}/dist built from a stub?)`
        else if (!existsSync(dist)) why = `${name} is not built (no packages/${fw}/dist): run \`npm run build\``
        else if (!existsSync(link)) why = `${name} is built but not linked into node_modules: run \`npm install\` at the root`
        else {
          const line =
            String(stderr)
              .split('\n')
              .find((l) => /Error/.test(l)) ?? String(err.message).split('\n')[0]
          why = `${name} failed to import: ${line.trim()}`
        }
        resolve({ ok: false, why })
      },
    )
  })
}

/**
 * Whether @tollgate/<fw> imports from the baseline tree `dir`, and that the adapter found there uses
 * that tree's @tollgate/core (not this one's). Checked in a child process, like tollgateStatus().
 */
function baselineStatus(fw, dir) {
  const name = `@tollgate/${fw}`
  const lib = new URL('./lib/baseline.mjs', import.meta.url).href
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { importFrom, inside } = await import(${JSON.stringify(lib)});
         const { realpathSync } = await import('node:fs');
         const r = await importFrom(${JSON.stringify(name)}, ${JSON.stringify(dir)});
         const missing = ['rateLimit', 'RedisStore'].filter((k) => typeof r.mod[k] !== 'function');
         if (missing.length) { console.error('MISSING ' + missing.join(' and ')); process.exit(3) }
         if (!r.coreDir || !inside(r.coreDir, realpathSync(${JSON.stringify(dir)}))) {
           console.error('FOREIGN_CORE ' + r.coreDir); process.exit(4)
         }
         console.log('BASELINE ' + JSON.stringify({ dir: r.dir, coreDir: r.coreDir, version: r.version }))`,
      ],
      { cwd: BENCH_DIR, timeout: 30_000 },
      (err, stdout, stderr) => {
        const found = String(stdout).match(/^BASELINE (.*)$/m)
        if (!err && found) return resolve({ ok: true, ...JSON.parse(found[1]) })
        let why
        const missing = String(stderr).match(/^MISSING (.*)$/m)
        const foreign = String(stderr).match(/^FOREIGN_CORE (.*)$/m)
        if (missing) why = `baseline ${name} does not export ${missing[1]}`
        else if (foreign) why = `baseline ${name} resolves @tollgate/core to ${foreign[1]}, outside ${dir}`
        else if (!existsSync(join(dir, 'packages', fw, 'dist'))) why = `baseline ${name} is not built (no ${dir}/packages/${fw}/dist)`
        else if (!existsSync(join(dir, 'node_modules', '@tollgate', fw))) why = `baseline ${name} is not linked: run \`npm ci\` in ${dir}`
        else {
          const line =
            String(stderr)
              .split('\n')
              .find((l) => /Error/.test(l)) ?? String(err?.message ?? 'no result').split('\n')[0]
          why = `baseline ${name} failed to import: ${line.trim()}`
        }
        resolve({ ok: false, why })
      },
    )
  })
}

function httpGet(port, path, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers, agent: false, timeout: 5000 }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }))
    })
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)))
    req.on('error', reject)
    req.end()
  })
}

/**
 * Checks run outside the measured slices, before and after them: the server answers {"ok":true}; in
 * "many" mode it resolves the client IP from X-Forwarded-For; in "flood" mode a limiter answers 429
 * once `max` requests have been allowed. Returns { problems, notes }: problems fail the case, notes
 * are shown next to it.
 */
async function probe(srv, mode, when) {
  const m = MODES[mode]
  const problems = []
  const notes = []
  const limiter = srv.name !== 'bare'
  const get = (path = '/', headers) => httpGet(srv.port, path, headers)
  const okBody = (r) => r.status === 200 && r.body.trim() === '{"ok":true}'
  const show = (r) => `${r.status} ${r.body.slice(0, 160)}`

  if (mode !== 'flood' || when === 'before' || !limiter) {
    const r = await get()
    if (!okBody(r)) problems.push(`GET / answered ${show(r)}`)
  }
  if (mode === 'many') {
    const ip = '10.250.1.2'
    const r = await get('/__ip', { 'X-Forwarded-For': ip })
    let seen
    try {
      seen = JSON.parse(r.body).ip
    } catch {}
    if (seen !== ip) problems.push(`trust proxy: X-Forwarded-For ${ip} was resolved as ${seen ?? show(r)}`)
  }
  if (mode === 'flood' && limiter) {
    // Before: the window is fresh (1 request used above), so expect 200s then 429s.
    // After: the client is over its limit; if the window just rolled over, 429s come back within max+1.
    const statuses = []
    for (let i = 0; i < m.max + 3; i++) {
      statuses.push((await get()).status)
      if (when === 'after' && statuses.at(-1) === 429) break
    }
    const allowed = statuses.filter((x) => x === 200).length + (when === 'before' ? 1 : 0)
    const other = statuses.filter((x) => x !== 200 && x !== 429)
    if (other.length) problems.push(`flood: unexpected statuses ${[...new Set(other)].join(', ')}`)
    if (!statuses.includes(429)) problems.push(`flood: no 429 after ${statuses.length} requests (max ${m.max})`)
    else if (when === 'before' && allowed > m.max)
      notes.push(`${allowed} requests allowed in the first window (max ${m.max}), see server output`)
  }
  return { problems, notes }
}

function parseInfo(text) {
  const calls = {}
  let reads = 0
  for (const line of text.split('\n')) {
    let m = line.match(/^cmdstat_([^:]+):calls=(\d+)/)
    if (m) calls[m[1]] = Number(m[2])
    m = line.match(/^total_reads_processed:(\d+)/)
    if (m) reads = Number(m[1])
  }
  return { calls, reads }
}

function infoDelta(a, b) {
  const byCommand = {}
  let total = 0
  for (const [cmd, n] of Object.entries(b.calls)) {
    if (cmd === 'info') continue // our own snapshots
    const d = n - (a.calls[cmd] ?? 0)
    if (d > 0) {
      byCommand[cmd] = d
      total += d
    }
  }
  return { total, byCommand, reads: Math.max(0, b.reads - a.reads - 1) } // -1: the INFO that took `b`
}

async function countKeys(redis, prefix) {
  let cursor = '0'
  let n = 0
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 2000)
    cursor = next
    n += keys.length
  } while (cursor !== '0')
  return n
}

// ---------------------------------------------------------------------------------------------
// One group = one framework in one mode: all its servers up at once, wrk rotated through them.

async function startServer(fw, caseName, mode, ctx) {
  const m = MODES[mode]
  const port = await freePort()
  const prefix = `bench:${ctx.runId}:${fw}:${mode}:${caseName}:`
  const srv = { name: caseName, port, prefix, status: 'starting', stderr: '', stdout: '' }
  const info = caseInfo(caseName)
  const args = [
    join(BENCH_DIR, 'servers', `${fw}.mjs`),
    '--case',
    baseOf(caseName), // a baseline twin runs the same case, with Tollgate from the baseline tree
    '--port',
    String(port),
    '--max',
    String(m.max),
    '--window-ms',
    String(m.windowMs),
    '--prefix',
    prefix,
  ]
  if (info.redis) args.push('--redis', ctx.redis.url)
  if (info.baseline) args.push('--tollgate-from', ctx.cfg.baseline)
  const [cmd, argv] = pinned(SERVER_CORE, process.execPath, args)
  const child = spawnTracked(`${fw}/${caseName}`, cmd, argv, {
    cwd: BENCH_DIR,
    env: { ...process.env, NODE_ENV: 'production' },
  })
  srv.child = child
  srv.pid = child.pid
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (d) => {
    if (srv.stderr.length < 8000) srv.stderr += d
  })
  try {
    const match = await waitForLine(child, /^(READY|SKIP)\b ?(.*)$/, 30_000, `${fw}/${caseName}`)
    if (match[1] === 'SKIP') {
      srv.status = 'skipped'
      srv.reason = match[2]
      await stopChild(child)
    } else {
      srv.status = 'running'
    }
  } catch (err) {
    srv.status = 'failed'
    srv.reason = `${err.message}${srv.stderr ? `: ${srv.stderr.trim().split('\n').slice(-5).join(' | ')}` : ''}`
    await stopChild(child)
  }
  child.stdout.on('data', (d) => {
    if (srv.stdout.length < 4000) srv.stdout += d
  })
  child.once('exit', (code, signal) => {
    if (srv.status === 'running' && !ctx.stopping.has(srv)) {
      srv.status = 'failed'
      srv.reason = `server exited during the run (${signal ?? code}): ${srv.stderr.trim().split('\n').slice(-5).join(' | ')}`
    }
  })
  return srv
}

async function measure(srv, mode, ctx, cycle, order) {
  const redis = ctx.redisClient
  const info0 = parseInfo(await redis.info('stats', 'commandstats'))
  const before = cpuTimes(srv.pid)
  const cpu0 = before.total
  const ipi0 = ipisTo(LOAD_CORE)
  const rcpu0 = cpuMicros(ctx.redis.pid)
  const t0 = performance.now()
  const w = await runWrk({
    port: srv.port,
    seconds: ctx.cfg.slice,
    connections: ctx.cfg.connections,
    script: MODES[mode].script,
    clients: ctx.cfg.clients,
    core: LOAD_CORE,
  })
  // Let the server finish the requests still in flight when wrk stopped (and their Redis calls),
  // so they are counted in this slice and not the next.
  await new Promise((r) => setTimeout(r, SETTLE_MS))
  let after = before
  try {
    after = cpuTimes(srv.pid)
  } catch {}
  const cpu1 = after.total
  const ipi1 = ipisTo(LOAD_CORE)
  const rcpu1 = cpuMicros(ctx.redis.pid)
  const wallUs = (performance.now() - t0) * 1000
  const info1 = parseInfo(await redis.info('stats', 'commandstats'))
  const d = infoDelta(info0, info1)
  const n = Math.max(1, w.requests)
  return {
    cycle,
    order,
    requests: w.requests,
    seconds: w.duration_us / 1e6,
    rps: w.rps,
    non2xx: w.non2xx,
    socketErrors: w.socket_errors,
    wrk: w,
    p50Ms: w.p50_us / 1000,
    p99Ms: w.p99_us / 1000,
    serverCpuUs: cpu1 - cpu0,
    serverUsPerReq: (cpu1 - cpu0) / n,
    // The kernel's part of it, and the wake-ups of wrk's core per request (see bench/README.md, "The
    // wake-up regime"): on a VM a server that answers each request as soon as it reads it wakes the load
    // generator for many of its answers, and those wake-ups, not the limiter, set much of its throughput.
    serverKernelUsPerReq: (after.kernel - before.kernel) / n,
    loadCoreIpisPerReq: ipi0 === null || ipi1 === null ? null : (ipi1 - ipi0) / n,
    // Share of one core over wrk's run (the settle time adds only the tail of in-flight requests).
    serverCpuShare: (cpu1 - cpu0) / w.duration_us,
    redisCpuShare: (rcpu1 - rcpu0) / w.duration_us,
    wallUs,
    redisCpuUs: rcpu1 - rcpu0,
    redisUsPerReq: (rcpu1 - rcpu0) / n,
    redisCommands: d.total,
    redisCommandsPerReq: d.total / n,
    redisCommandsByName: d.byCommand,
    redisReads: d.reads,
    redisReadsPerReq: d.reads / n,
  }
}

async function probeAll(servers, mode, group, when) {
  for (const s of servers) {
    const rec = group.cases[s.name]
    try {
      const { problems, notes } = await probe(s, mode, when)
      for (const p of problems) rec.checks.push(`${when} the run: ${p}`)
      for (const n of notes) rec.notes.push(`${when} the run: ${n}`)
    } catch (err) {
      rec.checks.push(`${when} the run: ${err.message}`)
    }
  }
}

async function runGroup(fw, mode, ctx, run) {
  const { cfg } = ctx
  const m = MODES[mode]
  const caseNames = casesOf(fw, cfg.casesFilter, cfg.baseline, cfg.listedOrder)
  const group = { framework: fw, mode, modeLabel: m.label, max: m.max, windowMs: m.windowMs, cases: {} }
  log(`\n== ${fw} / ${m.label}${cfg.runs > 1 ? ` (run ${run + 1}/${cfg.runs})` : ''}: ${caseNames.join(', ')}`)
  await ctx.redisClient.flushall()

  // Start every server of the group at once (Tollgate cases are skipped up front if it is not built).
  const servers = await Promise.all(
    caseNames.map(async (c) => {
      const t = caseInfo(c).baseline ? ctx.tollgateBase[fw] : ctx.tollgate[fw]
      if (caseInfo(c).tollgate && !t.ok) {
        return { name: c, status: 'skipped', reason: t.why }
      }
      return startServer(fw, c, mode, ctx)
    }),
  )
  for (const s of servers) {
    group.cases[s.name] = {
      id: s.name,
      label: caseInfo(s.name).label,
      status: s.status,
      reason: s.reason,
      slices: [],
      checks: [],
      notes: [],
    }
    if (s.status !== 'running') log(`   ${s.name}: ${s.status}: ${s.reason}`)
  }
  const running = () => servers.filter((s) => s.status === 'running')

  // Checks before measuring (after a moment for the servers' start-up work to settle).
  await new Promise((r) => setTimeout(r, 500))
  await probeAll(running(), mode, group, 'before')

  // Warm-up, so the JIT has settled before the first measured slice: 3 s by default, as a server's
  // throughput under this load climbs for its first ~3 s (Koa, 10,000 clients, 1 s slices from a fresh
  // process: bare 10.2k, 21.0k, 26.9k req/s, then steady; Tollgate on memory 2.7k, 20.7k, 24.8k, 25.6k;
  // the minimal limiter 8.2k, 21.6k, 25.5k), and a first slice still climbing would rank a case by
  // how much code it has for the JIT to compile rather than by its cost per request. One server at a
  // time by default: warming them all at once starves each of CPU for tens of ms at a time, which trips
  // short store deadlines (Tollgate's falls back to its local limiter) in a way no measured slice would see.
  if (cfg.warmup > 0 && running().length) {
    const warm = (s, seconds, connections) =>
      runWrk({ port: s.port, seconds, connections, script: m.script, clients: cfg.clients, core: LOAD_CORE }).catch((err) =>
        group.cases[s.name].checks.push(`warm-up: ${err.message.split('\n')[0]}`),
      )
    if (cfg.warmupParallel) {
      log(`   warm-up ${cfg.warmup} s, all servers at once`)
      await Promise.all(running().map((s) => warm(s, cfg.warmup, 10)))
    } else {
      log(`   warm-up ${cfg.warmup} s per server`)
      for (const s of running()) await warm(s, cfg.warmup, cfg.connections)
    }
    await new Promise((r) => setTimeout(r, 2 * SETTLE_MS)) // let the last warm-up's requests drain
  }

  // Cycles: forward, reverse, forward, ... so no case always follows the same neighbour.
  for (const s of servers) s.stderrBeforeCycles = (s.stderr ?? '').length
  for (let cycle = 0; cycle < cfg.cycles; cycle++) {
    const order = cycle % 2 === 0 ? servers : [...servers].reverse()
    const line = []
    let pos = 0
    for (const s of order) {
      if (s.status !== 'running') continue
      const rec = group.cases[s.name]
      try {
        // Cycle ids are unique across runs: a ratio is only ever taken within one cycle.
        const slice = await measure(s, mode, ctx, run * cfg.cycles + cycle, pos++)
        rec.slices.push(slice)
        line.push(`${s.name} ${(slice.rps / 1000).toFixed(1)}k`)
        if (mode === 'many' && caseInfo(s.name).redis && rec.keysSeen === undefined) {
          rec.keysSeen = await countKeys(ctx.redisClient, s.prefix)
        }
      } catch (err) {
        rec.checks.push(`cycle ${cycle + 1}: ${err.message.split('\n')[0]}`)
        line.push(`${s.name} ERROR`)
      }
    }
    log(`   cycle ${cycle + 1}/${cfg.cycles} ${cycle % 2 ? '<-' : '->'} ${line.join(', ')}`)
  }

  // Checks after measuring, then stop the group's servers.
  await probeAll(running(), mode, group, 'after')
  for (const s of servers) {
    if (s.child) {
      ctx.stopping.add(s)
      await stopChild(s.child)
    }
    const rec = group.cases[s.name]
    rec.status = s.status === 'running' ? 'ok' : s.status
    if (s.status === 'failed') rec.reason = s.reason
    const noise = (s.stderr ?? '').trim()
    if (noise && s.status !== 'skipped') {
      rec.serverStderr = noise.slice(0, 2000)
      const during = (s.stderr ?? '').length > (s.stderrBeforeCycles ?? Infinity)
      rec.notes.push(
        `the server wrote to stderr ${during ? 'during the measured cycles' : 'before the measured cycles'} (see Server output)`,
      )
    }
  }
  return group
}

/** One group per framework and mode: the runs' slices, checks and notes together, then summarised. */
function pool(runs, ctx) {
  const byCell = new Map()
  for (const g of runs) {
    const key = `${g.framework}/${g.mode}`
    const into = byCell.get(key)
    if (into === undefined) {
      byCell.set(key, g)
      continue
    }
    for (const [id, rec] of Object.entries(g.cases)) {
      const prev = into.cases[id]
      if (prev === undefined) {
        into.cases[id] = rec
        continue
      }
      prev.slices.push(...rec.slices)
      prev.checks.push(...rec.checks)
      prev.notes.push(...rec.notes)
      prev.keysSeen ??= rec.keysSeen
      if (rec.status !== 'ok' && prev.status === 'ok') Object.assign(prev, { status: rec.status, reason: rec.reason })
      if (rec.serverStderr && !prev.serverStderr) prev.serverStderr = rec.serverStderr
    }
  }
  const groups = [...byCell.values()]
  for (const g of groups) summarize(g, ctx)
  return groups
}

// ---------------------------------------------------------------------------------------------
// Statistics and the checks on the measured slices.

const median = (xs) => {
  if (!xs.length) return null
  const s = [...xs].sort((a, b) => a - b)
  const h = s.length >> 1
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2
}
const spread = (xs) => ({
  median: median(xs),
  min: xs.length ? Math.min(...xs) : null,
  max: xs.length ? Math.max(...xs) : null,
  n: xs.length,
})

function summarize(group, ctx) {
  const bare = group.cases.bare
  const bareByCycle = new Map((bare?.slices ?? []).map((s) => [s.cycle, s]))
  for (const rec of Object.values(group.cases)) {
    if (rec.status === 'skipped') continue
    const ratios = []
    const plusUs = []
    for (const s of rec.slices) {
      const b = bareByCycle.get(s.cycle)
      if (!b?.rps) continue
      ratios.push(s.rps / b.rps)
      plusUs.push(s.serverUsPerReq - b.serverUsPerReq)
    }
    const requests = rec.slices.reduce((a, s) => a + s.requests, 0)
    const non2xx = rec.slices.reduce((a, s) => a + s.non2xx, 0)
    const socketErrors = rec.slices.reduce((a, s) => a + s.socketErrors, 0)
    rec.summary = {
      cycles: rec.slices.length,
      requests,
      non2xx,
      non2xxShare: requests ? non2xx / requests : 0,
      socketErrors,
      rps: spread(rec.slices.map((s) => s.rps)),
      ratioToBare: spread(ratios),
      plusUsPerReq: spread(plusUs),
      serverUsPerReq: spread(rec.slices.map((s) => s.serverUsPerReq)),
      serverCpuShare: spread(rec.slices.map((s) => s.serverCpuShare)),
      serverKernelUsPerReq: spread(rec.slices.filter((s) => s.serverKernelUsPerReq != null).map((s) => s.serverKernelUsPerReq)),
      loadCoreIpisPerReq: spread(rec.slices.filter((s) => s.loadCoreIpisPerReq != null).map((s) => s.loadCoreIpisPerReq)),
      p50Ms: spread(rec.slices.map((s) => s.p50Ms)),
      p99Ms: spread(rec.slices.map((s) => s.p99Ms)),
      redisCommandsPerReq: spread(rec.slices.map((s) => s.redisCommandsPerReq)),
      redisReadsPerReq: spread(rec.slices.map((s) => s.redisReadsPerReq)),
      redisUsPerReq: spread(rec.slices.map((s) => s.redisUsPerReq)),
    }
    const sum = rec.summary
    const limiter = rec.id !== 'bare'
    if (rec.status === 'failed') rec.checks.push(rec.reason)
    const planned = ctx.cfg.cycles * ctx.cfg.runs
    if (rec.status === 'ok' && rec.slices.length < planned) rec.checks.push(`only ${rec.slices.length} of ${planned} slices measured`)
    if (group.mode === 'flood' && limiter) {
      if (requests && sum.non2xxShare < 0.99)
        rec.checks.push(`flood: only ${(sum.non2xxShare * 100).toFixed(2)}% of responses were non-2xx (want >= 99% 429s)`)
    } else if (non2xx > 0) {
      rec.checks.push(`${non2xx} non-2xx responses (${(sum.non2xxShare * 100).toFixed(3)}%) where the limit is never reached`)
    }
    if (socketErrors > 0) rec.checks.push(`${socketErrors} socket errors (connect/read/write/timeout) reported by wrk`)
    if (limiter && caseInfo(rec.id).redis && rec.keysSeen !== undefined) {
      const want = Math.min(1000, Math.floor(ctx.cfg.clients / 2))
      if (rec.keysSeen < want)
        rec.checks.push(
          `many clients: only ${rec.keysSeen} keys under the case's prefix after a slice (want >= ${want}); the limiter is not keying by the forwarded IP`,
        )
    }
    if (!caseInfo(rec.id).redis && rec.slices.some((s) => s.redisCommandsPerReq > 0.01))
      rec.checks.push('a case without Redis sent Redis commands during a slice')
    rec.ok = rec.status !== 'skipped' && rec.checks.length === 0
  }
}

/**
 * Before/after per framework, mode and Tollgate case: the per-cycle ratio of Tollgate's req/s to the
 * floor case's req/s in the same cycle, for the baseline twin (before) and the current build (after).
 * spread = the wider of the two min…max ranges; a drop of the median larger than that is `slower`.
 */
function compareWithBaseline(groups) {
  const rows = []
  for (const g of groups) {
    const floorByCycle = new Map((g.cases.floor?.slices ?? []).map((s) => [s.cycle, s]))
    for (const id of Object.keys(g.cases)) {
      const info = caseInfo(id)
      if (!info.tollgate || info.baseline || !g.cases[`${id}@base`]) continue
      const after = g.cases[id]
      const before = g.cases[`${id}@base`]
      const toFloor = (rec) =>
        new Map(rec.slices.filter((s) => floorByCycle.get(s.cycle)?.rps).map((s) => [s.cycle, s.rps / floorByCycle.get(s.cycle).rps]))
      const b = toFloor(before)
      const a = toFloor(after)
      const usByCycle = new Map(before.slices.map((s) => [s.cycle, s.serverUsPerReq]))
      const usDelta = after.slices.filter((s) => usByCycle.has(s.cycle)).map((s) => s.serverUsPerReq - usByCycle.get(s.cycle))
      const row = {
        framework: g.framework,
        mode: g.mode,
        case: id,
        store: info.redis ? 'redis' : 'memory',
        before: spread([...b.values()]),
        after: spread([...a.values()]),
        serverUsPerReqDelta: spread(usDelta),
        checks: [before, after, g.cases.floor].filter((r) => r && r.status !== 'skipped' && !r.ok).map((r) => r.id),
      }
      const problems = [!g.cases.floor && 'no floor case', !b.size && 'no before', !a.size && 'no after'].filter(Boolean)
      if (problems.length) {
        row.verdict = `n/a: ${problems.join(', ')}`
      } else {
        row.delta = row.after.median - row.before.median
        row.deltaShare = row.delta / row.before.median
        row.spread = Math.max(row.before.max - row.before.min, row.after.max - row.after.min)
        row.verdict = -row.delta > row.spread ? 'slower' : row.delta > row.spread ? 'faster' : 'within spread'
      }
      rows.push(row)
    }
  }
  return rows
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const cfg = config()
  installSignalHandlers()
  checkTools(['wrk', 'redis-server'])
  deadline(cfg.maxMinutes, 'the benchmark')
  const t0 = Date.now()

  const groups = []
  for (const fw of cfg.frameworks) for (const mode of cfg.modes) groups.push([fw, mode])
  const slices = groups.reduce((a, [fw]) => a + casesOf(fw, cfg.casesFilter, cfg.baseline).length, 0) * cfg.cycles
  const servers = slices / cfg.cycles
  const estimate =
    cfg.runs * (slices * (cfg.slice + 0.25) + (cfg.warmupParallel ? groups.length : servers) * (cfg.warmup + 0.2) + groups.length * 3)
  log(
    `Tollgate bench: ${cfg.frameworks.join(', ')} x ${cfg.modes.join(', ')}; ${cfg.runs > 1 ? `${cfg.runs} runs x ` : ''}${cfg.cycles} cycles x ${cfg.slice} s slices, ` +
      `wrk -t1 -c${cfg.connections}; about ${Math.ceil(estimate / 60)} min`,
  )

  const tollgate = {}
  await Promise.all(cfg.frameworks.map(async (fw) => (tollgate[fw] = await tollgateStatus(fw))))
  for (const fw of cfg.frameworks) if (!tollgate[fw].ok) log(`note: Tollgate cases for ${fw} are skipped: ${tollgate[fw].why}`)
  const tollgateBase = {}
  let trees = null
  if (cfg.baseline) {
    trees = { before: describeTree(cfg.baseline), after: describeTree(ROOT) }
    log(`before/after: @base cases run Tollgate from ${trees.before.text}; the others from ${trees.after.text}`)
    if (trees.before.dir === trees.after.dir) log('note: the baseline is this tree: an A/A run (both sides run the same build)')
    await Promise.all(cfg.frameworks.map(async (fw) => (tollgateBase[fw] = await baselineStatus(fw, cfg.baseline))))
    for (const fw of cfg.frameworks) {
      const b = tollgateBase[fw]
      if (!b.ok) log(`note: baseline Tollgate cases for ${fw} are skipped: ${b.why}`)
      else if (inside(b.dir, trees.after.dir) && trees.before.dir !== trees.after.dir)
        log(`warning: baseline @tollgate/${fw} resolved inside this tree (${b.dir})`)
    }
  }

  const redis = await startRedis(LOAD_CORE)
  log(`redis-server pid ${redis.pid} on ${redis.url}`)
  const { Redis } = await import('ioredis')
  const redisClient = new Redis(redis.url)
  redisClient.on('error', () => {})
  const ctx = { cfg, redis, redisClient, tollgate, tollgateBase, runId: Date.now().toString(36), stopping: new Set() }

  const measured = []
  try {
    for (let run = 0; run < cfg.runs; run++) for (const [fw, mode] of groups) measured.push(await runGroup(fw, mode, ctx, run))
  } finally {
    redisClient.disconnect()
    await redis.stop()
  }

  const results = pool(measured, ctx)
  const meta = {
    date: new Date().toISOString(),
    node: process.version,
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    pinned: canPin ? `servers on core ${SERVER_CORE}; wrk and redis-server on core ${LOAD_CORE}` : 'not pinned',
    redisServer: await new Promise((r) =>
      execFile('redis-server', ['--version'], (e, out) => r(e ? null : (out.match(/v=(\S+)/)?.[1] ?? null))),
    ),
    wrk: await new Promise((r) => execFile('wrk', ['-v'], (_e, out, err) => r(`${out}${err}`.match(/wrk (\S+)/)?.[1] ?? null))),
    versions: Object.fromEntries(
      [
        'express',
        'fastify',
        'koa',
        '@koa/router',
        'ioredis',
        'express-rate-limit',
        'rate-limit-redis',
        '@fastify/rate-limit',
        'koa-ratelimit',
        'rate-limiter-flexible',
      ].map((p) => [p, version(p)]),
    ),
    tollgate: Object.fromEntries(
      Object.entries(tollgate).map(([fw, t]) => [fw, t.ok ? (version(`@tollgate/${fw}`) ?? 'ok') : `skipped: ${t.why}`]),
    ),
    seconds: Math.round((Date.now() - t0) / 1000),
  }
  if (trees) {
    meta.baseline = {
      ...trees.before,
      tollgate: Object.fromEntries(
        Object.entries(tollgateBase).map(([fw, b]) => [
          fw,
          b.ok ? { version: b.version, dir: b.dir, core: b.coreDir } : `skipped: ${b.why}`,
        ]),
      ),
    }
    meta.current = trees.after
  }
  const report = { meta, config: cfg, groups: results }
  if (cfg.baseline) report.beforeAfter = compareWithBaseline(results)
  const md = renderMarkdown(report)
  // Only the default full run writes the page in the tree; everything else goes to bench/out/ (lib/out.mjs).
  const base = cfg.page ? join(BENCH_DIR, cfg.out) : outBase(cfg.out)
  const mdPath = `${base}.md`
  const jsonPath = `${base}.json`
  writeFileSync(mdPath, md)
  for (const chart of renderCharts(report, basename(base))) writeFileSync(join(dirname(base), chart.file), chart.svg)
  // Raw numbers, floats rounded to 4 decimals (µs and ratios do not need more).
  const round = (_k, v) => (typeof v === 'number' && !Number.isInteger(v) ? Math.round(v * 1e4) / 1e4 : v)
  writeFileSync(jsonPath, `${JSON.stringify(report, round, 1)}\n`)
  process.stdout.write(`\n${md}\n`)
  const failed = results.flatMap((g) => Object.values(g.cases).filter((c) => c.status !== 'skipped' && !c.ok))
  log(`wrote ${relative(process.cwd(), mdPath)} and ${relative(process.cwd(), jsonPath)} in ${Math.round(meta.seconds / 6) / 10} min`)
  if (failed.length) {
    log(`FAILED: ${failed.length} case(s) did not pass their checks; see the table`)
    await shutdown(1)
  }
  await shutdown(0)
}

// `npm run bench -- store ...`: another benchmark, by name (lib/subcommands.mjs).
const first = process.argv[2]
if (first && SUBCOMMANDS[first]) {
  process.exit(await runSubcommand(first, process.argv.slice(3)))
} else if (first && !first.startsWith('-')) {
  process.stderr.write(`unknown benchmark ${first} (choose from ${Object.keys(SUBCOMMANDS).join(', ')}, or see --help)\n`)
  process.exit(2)
}
await main()
