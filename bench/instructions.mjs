#!/usr/bin/env node
// Instructions per request: each memory-store case's whole server (HTTP parsing, the limiter, the
// response, the collector) run under valgrind's callgrind, which counts the instructions the server
// process executes instead of timing it. The count does not follow the CPU's clock (run it on an idle
// machine all the same: see bench/README.md), where the HTTP bench's throughput moves by several µs
// per request from one server start to the next. It orders the cases that are inside the HTTP bench's
// spread; instructions are not time, so it complements that bench rather than replacing it.
//
// The warm-up matters: after 20,000 requests V8 is still compiling and the heap still growing, which
// put ~14k instructions per request into bare fastify's count (91.4k against 77.0k after 100,000).
// Hence 100,000 by default. Even then one case's count can move between servers (bare and the minimal
// limiter within 0.4%, the floor by 4%, Tollgate by 7%: what V8 optimises and inlines is decided while
// the server runs), so compare cases over several rounds, not one server each.
//
//   node bench/instructions.mjs [--frameworks LIST] [--modes one,many,flood] [--cases LIST] [--rounds N]
//                               [--warm N] [--requests N] [--clients N] [--flood-window-ms MS] [--core N]
//                               [--symbols N] [--out NAME]
//
// --symbols N adds, per mode, the N functions where Tollgate's own instructions differ most from each
// other case's (and its N costliest): the count by function, without the HTTP bench's spread.
//
// --cases naming tollgate-memory-no-headers exactly adds Tollgate with `headers: false` on Express, like for like
// with rate-limiter-flexible's middleware, which writes no quota fields (as in run.mjs and hook-cost.mjs).
//
// --clients N sets the pool of "many" mode (default 10,000, the HTTP bench's). Under callgrind a server
// answers ~20 times fewer requests a second than in the HTTP bench, so with 10,000 clients each one
// returns about once in ten 1-second windows instead of twice in one: every request opens a new cell
// and the memory store's sweep drops nearly every cell it holds. A pool scaled to the measured rate
// (printed per case: requests a second under callgrind, and each client's requests per window) keeps
// each client's requests per window as in the HTTP bench, so the count is of the same work.
//
// --flood-window-ms MS sets the window of "flood" mode (default the HTTP bench's, a minute). At each
// window's start a flooded limiter allows its 10 requests again: ten 200s among the 429s, answers of
// another shape, and V8 deoptimizes the response path it had specialized to refusals and compiles it
// again. Under wrk that happens once in millions of requests; under callgrind once in 30,000 to 80,000, so
// whether the 20,000 counted requests hold an edge moved fastify's count by up to a fifth. A window of
// an hour (3600000) keeps every edge out of the count: the count of the refusal path itself.
//
// --cache-sim also has callgrind simulate the caches and the branch predictor (--cache-sim=yes
// --branch-sim=yes; about twice as slow) and tables per request: L1 instruction and data misses,
// last-level misses, and mispredicted conditional and indirect branches. These are what make one
// instruction cost more time than another, and what a count of instructions alone cannot show.
//
// Per case and round: the server (bench/servers/<framework>.mjs, the HTTP bench's own) starts under
// callgrind with counting off; this process sends --warm requests (8 keep-alive connections; in "many"
// mode each request from one of --clients addresses in X-Forwarded-For, round-robin; in "flood" one
// client over its limit, 10 a minute, as the HTTP bench's flood, so nearly every answer is a 429), turns counting on,
// sends --requests more, turns it off, and reads the count. Rounds alternate the order of the cases.
// Needs valgrind (callgrind_control comes with it) and the Tollgate packages built. A server under
// callgrind runs ~50 times slower: a case takes ~2 min (fastify) with the default counts.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { MODES, picks } from './lib/cases.mjs'
import { outBase, outHelp } from './lib/out.mjs'
import { deadline, freePort, installSignalHandlers, onCleanup, pinned, spawnTracked, stopAll, stopChild, which } from './lib/procs.mjs'
import { CLIENTS, median } from './lib/stats.mjs'

const { values } = parseArgs({
  options: {
    frameworks: { type: 'string', default: 'fastify,express,koa' },
    modes: { type: 'string', default: 'one,many' },
    cases: { type: 'string', default: '' },
    rounds: { type: 'string', default: '2' },
    warm: { type: 'string', default: '100000' },
    requests: { type: 'string', default: '20000' },
    clients: { type: 'string', default: String(CLIENTS.length) },
    'flood-window-ms': { type: 'string', default: String(MODES.flood.windowMs) },
    out: { type: 'string', default: 'instructions' },
    core: { type: 'string', default: '0' },
    'max-minutes': { type: 'string', default: '90' },
    symbols: { type: 'string', default: '0' },
    'cache-sim': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  },
})
if (values.help) {
  console.log(
    'usage: node bench/instructions.mjs [--frameworks fastify,express,koa] [--modes one,many,flood] [--cases LIST] [--rounds N] [--warm N] [--requests N] [--clients N] [--flood-window-ms MS] [--core N] [--symbols N] [--cache-sim] [--out NAME]',
  )
  console.log(`  ${outHelp('instructions')}`)
  process.exit(0)
}
for (const tool of ['valgrind', 'callgrind_control']) {
  if (!which(tool)) {
    console.error(`instructions.mjs needs ${tool} on the PATH (apt-get install valgrind)`)
    process.exit(2)
  }
}
installSignalHandlers()
deadline(Number(values['max-minutes']), 'instructions.mjs')

const ROUNDS = Number(values.rounds)
const SYMBOLS = Number(values.symbols)
const WARM = Number(values.warm)
const REQUESTS = Number(values.requests)
const CACHE_SIM = values['cache-sim']
const POOL = Number(values.clients)
if (!Number.isSafeInteger(POOL) || POOL < 1 || POOL > CLIENTS.length) {
  console.error(`--clients must be a whole number from 1 to ${CLIENTS.length}, got ${values.clients}`)
  process.exit(2)
}
const FLOOD_WINDOW_MS = Number(values['flood-window-ms'])
if (!Number.isSafeInteger(FLOOD_WINDOW_MS) || FLOOD_WINDOW_MS < 1000) {
  console.error(`--flood-window-ms must be a whole number of ms ≥ 1000, got ${values['flood-window-ms']}`)
  process.exit(2)
}
/** A count with its sign, as "+1,234" or "−1,234" (an Express refusal costs less than bare's route). */
const signed = (n) => `${n < 0 ? '−' : '+'}${Math.abs(Math.round(n)).toLocaleString('en-US')}`
/** "a minute", "an hour", "per 90 s": a flood window in words. */
const per = (ms) => (ms === 60_000 ? 'a minute' : ms === 3_600_000 ? 'an hour' : `per ${ms / 1000} s`)
/** Each mode's limit and window, flood's window as --flood-window-ms sets it. */
const LIMITS = { ...MODES, flood: { ...MODES.flood, windowMs: FLOOD_WINDOW_MS } }
const CONNECTIONS = 8
const CASES = {
  fastify: ['bare', 'floor', 'minimal', 'tollgate-memory', 'frl-memory'],
  express: ['bare', 'floor', 'minimal', 'tollgate-memory', 'erl-memory', 'rlf-memory'],
  koa: ['bare', 'floor', 'minimal', 'tollgate-memory', 'krl-memory'],
}
const PEERS = { fastify: ['frl-memory'], express: ['erl-memory', 'rlf-memory'], koa: ['krl-memory'] }
// Tollgate with `headers: false`, like for like with rate-limiter-flexible's middleware (which writes no quota
// fields): counted only when --cases names it exactly, as in run.mjs.
const NO_HEADERS = 'tollgate-memory-no-headers'
const LIKE_FOR_LIKE = { 'rlf-memory': NO_HEADERS }
if (values.cases) {
  const wanted = values.cases.split(',')
  if (wanted.includes(NO_HEADERS)) CASES.express.splice(CASES.express.indexOf('tollgate-memory') + 1, 0, NO_HEADERS)
  const ids = Object.values(CASES).flat()
  for (const fw in CASES) CASES[fw] = CASES[fw].filter((c) => c === 'bare' || picks(wanted, c, ids))
}
const work = mkdtempSync(join(tmpdir(), 'tollgate-instructions-'))
onCleanup(() => rmSync(work, { recursive: true, force: true }))

/**
 * Sends `n` GET / over CONNECTIONS keep-alive connections; resolves with the count of answers other
 * than the mode's (200; in a flood 429, or 200 for the few a new window allows).
 */
async function drive(port, n, mode, caseName) {
  const many = mode === 'many'
  const flood = mode === 'flood' && caseName !== 'bare' // bare answers every request
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS })
  const t0 = performance.now()
  let left = n
  let bad = 0
  let allowed = 0
  let next = 0
  const one = () =>
    new Promise((done, fail) => {
      const headers = many ? { 'x-forwarded-for': CLIENTS[next++ % POOL] } : {}
      const req = request({ host: '127.0.0.1', port, path: '/', agent, headers }, (res) => {
        if (res.statusCode !== 200 && !(flood && res.statusCode === 429)) bad++
        else if (flood && res.statusCode === 200) allowed++
        res.resume()
        res.on('end', done)
      })
      req.on('error', fail)
      req.end()
    })
  const loop = async () => {
    while (left-- > 0) await one()
  }
  await Promise.all(Array.from({ length: CONNECTIONS }, loop))
  agent.destroy()
  // A flood is of refusals: at most the mode's max allowed per window it spans, and one window more.
  const { max, windowMs } = LIMITS.flood
  if (flood && allowed > max * (Math.ceil((performance.now() - t0) / windowMs) + 1)) bad += allowed
  return bad
}

/** Instructions per request of one case in one mode: a server of its own under callgrind. */
async function measure(framework, caseName, mode) {
  const port = await freePort()
  const out = join(work, `${framework}-${caseName}-${port}`)
  // The server on one core, 0 as in the HTTP bench (taskset execs, so the PID is valgrind's, which is
  // the server's). A server under callgrind leaves its client mostly idle, so two runs of this bench
  // can share a 2-core machine, one per core (--core 1 for the second).
  const [cmd, args] = pinned(Number(values.core), 'valgrind', [
    '--tool=callgrind',
    '--instr-atstart=no',
    `--callgrind-out-file=${out}.%p`,
    ...(SYMBOLS > 0 ? ['--dump-instr=yes', '--dump-line=no', '--compress-strings=no', '--compress-pos=no'] : []),
    ...(CACHE_SIM ? ['--cache-sim=yes', '--branch-sim=yes'] : []),
    process.execPath,
    ...(SYMBOLS > 0 ? ['--perf-basic-prof'] : []),
    resolve(import.meta.dirname, 'servers', `${framework}.mjs`),
    '--case',
    caseName,
    '--port',
    String(port),
    '--max',
    String(LIMITS[mode].max),
    '--window-ms',
    String(LIMITS[mode].windowMs),
  ])
  // In the scratch directory: --perf-basic-prof also writes V8's isolate log to the working directory.
  const child = spawnTracked(`${framework} ${caseName} under callgrind`, cmd, args, { cwd: work })
  let log = ''
  let rate = 0
  child.stderr.on('data', (d) => {
    log += d
  })
  try {
    await new Promise((ready, fail) => {
      let text = ''
      child.stdout.on('data', (d) => {
        text += d
        if (text.includes('READY')) ready()
        if (text.includes('SKIP')) fail(new Error(`${caseName} skipped: ${text.trim()}`))
      })
      child.on('exit', (code) => fail(new Error(`${framework} ${caseName} exited (${code}) before READY:\n${log.slice(-2000)}`)))
    })
    const control = (...args) => execFileSync('callgrind_control', [...args, String(child.pid)], { stdio: 'ignore' })
    const badWarm = await drive(port, WARM, mode, caseName)
    control('-i', 'on')
    const t0 = performance.now()
    const bad = await drive(port, REQUESTS, mode, caseName)
    rate = REQUESTS / ((performance.now() - t0) / 1000)
    control('-i', 'off')
    control('-d')
    if (bad + badWarm > 0)
      throw new Error(
        `${framework} ${caseName}: ${bad + badWarm} answers were not ${mode === 'flood' && caseName !== 'bare' ? '429' : '200'}`,
      )
  } finally {
    await stopChild(child, 30_000)
  }
  // Each file (one per thread) names its event columns (`events: Ir Dr …`) and sums them (`summary:`).
  const sums = {}
  const files = readdirSync(work).filter((f) => f.startsWith(`${framework}-${caseName}-${port}.`))
  for (const f of files) {
    let names = ['Ir']
    for (const line of readFileSync(join(work, f), 'utf8').split('\n')) {
      if (line.startsWith('events:')) names = line.split(/\s+/).slice(1)
      else if (line.startsWith('summary:') || line.startsWith('totals:')) {
        line
          .split(/\s+/)
          .slice(1)
          .forEach((n, i) => {
            if (names[i]) sums[names[i]] = (sums[names[i]] ?? 0) + Number(n)
          })
      }
    }
  }
  const total = sums.Ir ?? 0
  if (!(total > 0)) throw new Error(`${framework} ${caseName}: callgrind reported no instructions`)
  const symbols =
    SYMBOLS > 0
      ? selfCosts(
          files.map((f) => join(work, f)),
          `/tmp/perf-${child.pid}.map`,
        )
      : undefined
  for (const f of files) rmSync(join(work, f), { force: true })
  rmSync(`/tmp/perf-${child.pid}.map`, { force: true })
  const events = CACHE_SIM ? Object.fromEntries(Object.entries(sums).map(([name, n]) => [name, n / REQUESTS])) : undefined
  return { ir: total / REQUESTS, rate, symbols, events }
}

/**
 * --symbols: each function's own instructions per request (not its callees'). Callgrind names the
 * functions it has symbols for (node's C++, V8's builtins); JIT-compiled JavaScript it knows only by
 * address, so each instruction's address is looked up in node's perf map (--perf-basic-prof), the
 * newest code at that address winning (V8 reuses collected code's memory).
 */
function selfCosts(files, mapFile) {
  const ranges = []
  try {
    for (const line of readFileSync(mapFile, 'utf8').split('\n')) {
      const m = line.match(/^([0-9a-f]+) ([0-9a-f]+) (.*)$/)
      if (m) ranges.push({ start: Number.parseInt(m[1], 16), end: Number.parseInt(m[1], 16) + Number.parseInt(m[2], 16), name: m[3] })
    }
  } catch {}
  // Newest first, then by start: a binary search over the starts finds candidates; the newest owner wins.
  const order = ranges.map((r, i) => ({ ...r, age: i })).sort((a, b) => a.start - b.start)
  const jitName = (address) => {
    let lo = 0
    let hi = order.length - 1
    let found
    // Ranges can overlap (reused memory): scan back from the last start at or below the address.
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      if (order[mid].start <= address) lo = mid + 1
      else hi = mid - 1
    }
    for (let i = hi; i >= 0 && i > hi - 64; i--) {
      const r = order[i]
      if (address < r.end && (found === undefined || r.age > found.age)) found = r
    }
    return found?.name
  }
  const costs = new Map()
  const add = (name, n) => costs.set(name, (costs.get(name) ?? 0) + n)
  for (const file of files) {
    let fn = ''
    let afterCalls = false
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (line.startsWith('fn=')) fn = line.slice(3)
      else if (line.startsWith('calls=')) afterCalls = true
      else if (line.startsWith('0x')) {
        // The line after calls= is the call's inclusive cost, which belongs to the callee.
        if (afterCalls) {
          afterCalls = false
          continue
        }
        const [address, ir] = line.split(' ')
        const n = Number(ir)
        if (!(n > 0)) continue
        if (fn.startsWith('0x')) add(tidy(jitName(Number.parseInt(address, 16)) ?? '(JIT code, unnamed)'), n)
        else add(fn, n)
      }
    }
  }
  return Object.fromEntries([...costs].map(([name, n]) => [name, n / REQUESTS]))
}

const tidy = (name) => name.replace(/\S*node_modules\//g, '').replace(/file:\/\/\S*?\/(packages|bench)\//g, '$1/')

const started = Date.now()
const results = []
for (const framework of values.frameworks.split(',')) {
  if (!CASES[framework]) throw new Error(`unknown framework ${framework}`)
  for (const mode of values.modes.split(',')) {
    if (!['one', 'many', 'flood'].includes(mode)) throw new Error(`unknown mode ${mode} (one, many or flood)`)
    const names = CASES[framework]
    const counts = Object.fromEntries(names.map((n) => [n, []]))
    const symbolRounds = Object.fromEntries(names.map((n) => [n, []]))
    const rates = Object.fromEntries(names.map((n) => [n, []]))
    const eventRounds = Object.fromEntries(names.map((n) => [n, []]))
    for (let round = 0; round < ROUNDS; round++) {
      for (const name of round % 2 === 0 ? names : [...names].reverse()) {
        const { ir, rate, symbols, events } = await measure(framework, name, mode)
        counts[name].push(ir)
        rates[name].push(rate)
        if (events) eventRounds[name].push(events)
        if (symbols) symbolRounds[name].push(symbols)
        console.error(
          `${framework} ${mode} ${name}: ${counts[name].at(-1).toFixed(0)} instructions per request, ${rate.toFixed(0)} req/s${mode === 'many' ? `, ${(rate / POOL).toFixed(2)} requests per client per second` : ''} (${((Date.now() - started) / 60000).toFixed(1)} min)`,
        )
      }
    }
    const bare = median(counts.bare)
    for (const name of names) {
      const ir = median(counts[name])
      results.push({
        framework,
        mode,
        case: name,
        ir,
        rounds: counts[name],
        rate: median(rates[name]),
        ...(CACHE_SIM ? { events: medianEvents(eventRounds[name]) } : {}),
        overBare: ir - bare,
        bareOver: bare / ir,
        ...(SYMBOLS > 0 ? { symbols: meanSymbols(symbolRounds[name]) } : {}),
      })
    }
  }
}

/** Each simulated event's count per request, the median over rounds. */
function medianEvents(rounds) {
  const names = [...new Set(rounds.flatMap((r) => Object.keys(r)))]
  return Object.fromEntries(names.map((name) => [name, median(rounds.map((r) => r[name] ?? 0))]))
}

/** Each symbol's instructions per request, the mean over rounds (0 in a round where it did not run). */
function meanSymbols(rounds) {
  const sums = {}
  for (const r of rounds) for (const [name, n] of Object.entries(r)) sums[name] = (sums[name] ?? 0) + n / rounds.length
  // The costliest 300 of at least 5 instructions per request: the rest would run the JSON to megabytes.
  return Object.fromEntries(
    Object.entries(sums)
      .filter(([, n]) => n >= 5)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 300),
  )
}

/**
 * The --symbols table of one mode: the functions whose own instructions per request differ most
 * between Tollgate and any other case, and Tollgate's costliest, one column per case.
 */
function symbolTable(rows) {
  const ours = rows.find((r) => r.case === 'tollgate-memory')?.symbols
  if (!ours) return []
  const names = new Set()
  const all = [...new Set(rows.flatMap((r) => Object.keys(r.symbols)))]
  const top = (score) => {
    const scored = all.map((name) => [name, score(name)]).sort((a, b) => b[1] - a[1])
    for (const [name] of scored.slice(0, SYMBOLS)) names.add(name)
  }
  top((name) => ours[name] ?? 0)
  for (const r of rows) if (r.symbols !== ours) top((name) => Math.abs((ours[name] ?? 0) - (r.symbols[name] ?? 0)))
  const ordered = [...names].sort((a, b) => (ours[b] ?? 0) - (ours[a] ?? 0))
  // V8's optimizing compiler runs on background threads of the same process: code still being
  // compiled after the warm-up, which a longer --warm shrinks. Summed here so it can be told apart.
  const compiler = (symbols) =>
    Object.entries(symbols)
      .filter(([name]) => COMPILER.test(name))
      .reduce((sum, [, n]) => sum + n, 0)
  const cut = (name) => (name.length > 90 ? `${name.slice(0, 87)}…` : name).replaceAll('|', '\\|')
  return [
    `Own instructions per request by function (mean of rounds; JavaScript named from node's perf map; code V8 inlined counts in its caller):`,
    '',
    `| function | ${rows.map((r) => r.case).join(' | ')} |`,
    `|---|${rows.map(() => '--:').join('|')}|`,
    `| *all of V8's optimizing compiler* | ${rows.map((r) => Math.round(compiler(r.symbols)).toLocaleString('en-US')).join(' | ')} |`,
    ...ordered.map((name) => `| ${cut(name)} | ${rows.map((r) => Math.round(r.symbols[name] ?? 0).toLocaleString('en-US')).join(' | ')} |`),
    '',
  ]
}

/** --cache-sim: the simulated misses and mispredictions per request of each case, and Tollgate's over the floor's. */
function simTable(rows) {
  const columns = [
    ['Ir', 'instructions'],
    ['I1mr', 'L1 instruction misses'],
    ['D1mr+D1mw', 'L1 data misses'],
    ['ILmr+DLmr+DLmw', 'last-level misses'],
    ['Bcm', 'mispredicted conditional branches'],
    ['Bim', 'mispredicted indirect branches'],
  ]
  const value = (r, key) => key.split('+').reduce((sum, k) => sum + (r.events?.[k] ?? 0), 0)
  const floor = rows.find((r) => r.case === 'floor')
  const fmt = (n) => (n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1))
  const out = [
    `Simulated by callgrind (--cache-sim), per request, median of rounds${floor ? '; in brackets, the case over the floor' : ''}:`,
    '',
    `| case | ${columns.map(([, label]) => label).join(' | ')} |`,
    `|---|${columns.map(() => '--:').join('|')}|`,
  ]
  for (const r of rows) {
    const cells = columns.map(([key]) => {
      const v = value(r, key)
      if (!floor || r === floor) return fmt(v)
      const d = v - value(floor, key)
      return `${fmt(v)} (${d >= 0 ? '+' : '−'}${fmt(Math.abs(d))})`
    })
    out.push(`| ${LABELS[r.case] ?? r.case} | ${cells.join(' | ')} |`)
  }
  out.push('')
  return out
}

const COMPILER = /v8::internal::(compiler|maglev|wasm)::|v8::internal::Compiler|OptimizingCompileDispatcher|TurbofanCompilationJob/

const LABELS = {
  bare: '**bare (no limiter)**',
  floor: 'floor: the same headers and 429, no limiter logic',
  minimal: 'minimal: the floor plus a per-client count',
  'tollgate-memory': '**Tollgate, memory**',
  [NO_HEADERS]: 'Tollgate, memory, `headers: false` (no quota fields)',
  'frl-memory': '@fastify/rate-limit, memory',
  'erl-memory': 'express-rate-limit, memory',
  'rlf-memory': 'rate-limiter-flexible, memory (writes no quota fields)',
  'krl-memory': 'koa-ratelimit, memory',
}
const lines = [
  '# Instructions per request, under callgrind',
  '',
  `\`node bench/instructions.mjs --rounds ${ROUNDS} --warm ${WARM} --requests ${REQUESTS}${POOL !== CLIENTS.length ? ` --clients ${POOL}` : ''}${FLOOD_WINDOW_MS !== MODES.flood.windowMs ? ` --flood-window-ms ${FLOOD_WINDOW_MS}` : ''}\`, node ${process.version}, ${new Date().toISOString().slice(0, 10)}, ${((Date.now() - started) / 60000).toFixed(1)} min. Instructions the server process executed per request over ${REQUESTS.toLocaleString('en-US')} requests after ${WARM.toLocaleString('en-US')} of warm-up, median of ${ROUNDS} rounds (each round a new server per case; every round's figure listed). *bare ÷ case* is bare's count over the case's: the throughput the case would have relative to bare if a request's time followed its instructions. See the header of bench/instructions.mjs.`,
  '',
]
for (const framework of values.frameworks.split(',')) {
  for (const mode of values.modes.split(',')) {
    const rows = results.filter((r) => r.framework === framework && r.mode === mode)
    if (rows.length === 0) continue
    const floor = rows.find((r) => r.case === 'floor')
    const ours = rows.find((r) => r.case === 'tollgate-memory')
    const title = {
      one: 'one client',
      many: `${POOL.toLocaleString('en-US')} clients`,
      flood: `flood (one client over its limit of ${LIMITS.flood.max} ${per(LIMITS.flood.windowMs)})`,
    }
    lines.push(`## ${framework}, ${title[mode]}`, '')
    const perClient = mode === 'many' ? ' | requests per client per 1-s window' : ''
    lines.push(
      `| case | instructions per request | each round | + over bare | bare ÷ case | req/s under callgrind${perClient} |`,
      `|---|--:|--:|--:|--:|--:|${perClient ? '--:|' : ''}`,
    )
    for (const r of rows) {
      lines.push(
        `| ${LABELS[r.case] ?? r.case} | ${Math.round(r.ir).toLocaleString('en-US')} | ${r.rounds.map((x) => Math.round(x).toLocaleString('en-US')).join(' / ')} | ${r.case === 'bare' ? '–' : signed(r.overBare)} | ${r.bareOver.toFixed(3)} | ${Math.round(r.rate).toLocaleString('en-US')}${perClient ? ` | ${(r.rate / POOL).toFixed(2)}` : ''} |`,
      )
    }
    const notes = []
    const minimal = rows.find((r) => r.case === 'minimal')
    if (ours && floor) notes.push(`Tollgate ÷ floor (by instructions): ${(floor.ir / ours.ir).toFixed(3)}`)
    if (minimal && floor) notes.push(`minimal ÷ floor: ${(floor.ir / minimal.ir).toFixed(3)}`)
    if (ours && minimal) notes.push(`Tollgate ÷ minimal: ${(minimal.ir / ours.ir).toFixed(3)}`)
    for (const peer of PEERS[framework]) {
      const p = rows.find((r) => r.case === peer)
      if (ours && p)
        notes.push(
          `Tollgate ÷ ${peer}: ${(p.ir / ours.ir).toFixed(3)} (Tollgate ${signed(ours.overBare)} over bare, the peer ${signed(p.overBare)})`,
        )
      const like = rows.find((r) => r.case === LIKE_FOR_LIKE[peer])
      if (like && p)
        notes.push(
          `Tollgate with \`headers: false\` ÷ ${peer}: ${(p.ir / like.ir).toFixed(3)} (${signed(like.overBare)} over bare, the peer ${signed(p.overBare)})`,
        )
    }
    if (notes.length) lines.push('', notes.join('; '), '')
    else lines.push('')
    if (CACHE_SIM) lines.push(...simTable(rows))
    if (SYMBOLS > 0) lines.push(...symbolTable(rows))
  }
}
const md = lines.join('\n')
const base = outBase(values.out)
writeFileSync(`${base}.md`, md)
writeFileSync(
  `${base}.json`,
  `${JSON.stringify({ rounds: ROUNDS, warm: WARM, requests: REQUESTS, clients: POOL, node: process.version, results }, null, 1)}\n`,
)
console.log(md)
console.error(`wrote ${relative(process.cwd(), base)}.md and .json`)
await stopAll()
process.exit(0)
