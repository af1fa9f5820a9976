#!/usr/bin/env node
// Where a case's server time goes, under the HTTP bench's own load: each case's server (the HTTP
// bench's, servers/<framework>.mjs, with node's --perf-basic-prof so JIT code has names) pinned to
// core 0 under wrk (-t1 -c50, core 1, one client), sampled by `perf record -e cpu-clock` (a timer, so
// it needs no hardware counters and works in a VM). Each sample is charged to a symbol and turned into
// µs of server time per request. Cases run one server at a time, interleaved, for --rounds rounds.
//
//   node bench/profile.mjs [--framework fastify] [--cases floor,minimal,tollgate-memory] [--rounds 3]
//                          [--mode one|many|flood] [--seconds 10] [--warm 5] [--top 25] [--out profile-fastify]
//
// --mode many loads with the HTTP bench's many-clients script (10,000 client IPs by X-Forwarded-For);
// a Redis case (tollgate-redis, minimal-redis, …) gets a redis-server of its own on core 1, next to wrk,
// as in the HTTP bench.
//
// It reports each case's req/s, its server time per request by category (Tollgate's own functions, the
// bench's hand-written hook, other JavaScript, V8 builtins, V8's runtime, GC, node's native code, the
// kernel), and the symbols whose time differs most between the last case and each other one (mean
// over rounds). Needs perf (apt-get install linux-perf), wrk and taskset, and the packages built.
//
// What it cannot do: code inlined into a caller is charged to the caller (Tollgate's code inlined into
// fastify's hook runner reads as fastify's), and a JIT address reused after its code was collected is
// named after its first owner, so the map is cut to each address's last owner before perf reads it.
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { CASES as CASE_INFO, MODES } from './lib/cases.mjs'
import { outBase, outHelp } from './lib/out.mjs'
import {
  deadline,
  freePort,
  installSignalHandlers,
  onCleanup,
  pinned,
  spawnTracked,
  startRedis,
  stopAll,
  stopChild,
  waitForLine,
  which,
} from './lib/procs.mjs'
import { median } from './lib/stats.mjs'
import { WRK_DIR } from './lib/wrk.mjs'

const { values } = parseArgs({
  options: {
    framework: { type: 'string', default: 'fastify' },
    cases: { type: 'string', default: 'floor,minimal,tollgate-memory' },
    rounds: { type: 'string', default: '3' },
    mode: { type: 'string', default: 'one' },
    seconds: { type: 'string', default: '10' },
    warm: { type: 'string', default: '5' },
    top: { type: 'string', default: '25' },
    out: { type: 'string', default: '' },
    'max-minutes': { type: 'string', default: '30' },
    help: { type: 'boolean', short: 'h' },
  },
})
if (values.help) {
  console.log(
    'usage: node bench/profile.mjs [--framework fastify] [--cases floor,minimal,tollgate-memory] [--rounds 3] [--mode one|many|flood] [--seconds 10] [--warm 5] [--top 25] [--out NAME]',
  )
  console.log(`  ${outHelp('profile-<framework>', 'NAME.md')}`)
  process.exit(0)
}
for (const tool of ['perf', 'wrk', 'taskset']) {
  if (!which(tool)) {
    console.error(`profile.mjs needs ${tool} on the PATH (apt-get install linux-perf wrk util-linux)`)
    process.exit(2)
  }
}
installSignalHandlers()
deadline(Number(values['max-minutes']), 'profile.mjs')

const FRAMEWORK = values.framework
const CASES = values.cases.split(',')
const MODE = MODES[values.mode]
if (MODE === undefined) {
  console.error(`--mode: one, many or flood, not ${values.mode}`)
  process.exit(2)
}
for (const c of CASES) {
  if (CASE_INFO[c] === undefined) {
    console.error(`unknown case ${c}; node bench/run.mjs --list names them`)
    process.exit(2)
  }
}
// Redis cases count in a redis-server of their own, on core 1 beside wrk, as in the HTTP bench.
const redisServer = CASES.some((c) => CASE_INFO[c].redis) ? await startRedis(1) : undefined
const ROUNDS = Number(values.rounds)
const SECONDS = Number(values.seconds)
const HZ = 4999
const OUT = outBase(values.out || `profile-${FRAMEWORK}`)
const work = mkdtempSync(join(tmpdir(), 'tollgate-profile-'))
onCleanup(() => rmSync(work, { recursive: true, force: true }))

/** Runs wrk against `port` for `seconds` on core 1; resolves with its req/s. */
function load(port, seconds) {
  const [cmd, args] = pinned(1, 'wrk', [
    '-t1',
    '-c50',
    `-d${seconds}s`,
    '-s',
    join(WRK_DIR, `${MODE.script}.lua`),
    `http://127.0.0.1:${port}/`,
  ])
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, BENCH_WRK_DIR: WRK_DIR } })
    let text = ''
    child.stdout.on('data', (d) => {
      text += d
    })
    child.on('error', fail)
    child.on('exit', () => {
      const json = text.match(/^WRK_JSON (\{.*\})$/m)
      const r = json ? JSON.parse(json[1]) : undefined
      const rps = r ? r.requests / (r.duration_us / 1e6) : Number(text.match(/Requests\/sec:\s+([\d.]+)/)?.[1])
      if (rps > 0) done(rps)
      else fail(new Error(`wrk printed no rate:\n${text}`))
    })
  })
}

/** One server of `caseName` profiled: its req/s and µs per request by symbol (`[k]` marks the kernel's). */
async function profile(caseName) {
  const port = await freePort()
  const data = join(work, `${caseName}-${port}.data`)
  const [cmd, args] = pinned(0, process.execPath, [
    '--perf-basic-prof',
    resolve(import.meta.dirname, 'servers', `${FRAMEWORK}.mjs`),
    '--case',
    caseName,
    '--port',
    String(port),
    '--max',
    String(MODE.max),
    '--window-ms',
    String(MODE.windowMs),
    ...(CASE_INFO[caseName].redis ? ['--redis', redisServer.url, '--prefix', `profile-${port}:`] : []),
  ])
  // In the scratch directory: --perf-basic-prof also writes V8's isolate log to the working directory.
  const server = spawnTracked(`${FRAMEWORK} ${caseName}`, cmd, args, { cwd: work })
  server.stderr.resume()
  try {
    const [line] = await waitForLine(server, /READY|SKIP.*/, 30_000, `${FRAMEWORK} ${caseName}`)
    if (line.startsWith('SKIP')) throw new Error(`${FRAMEWORK} ${caseName} cannot run: ${line}`)
    await load(port, Number(values.warm))
    // wrk runs a second longer on each side of the sampled window, so the window is under full load.
    const rate = load(port, SECONDS + 2)
    await new Promise((r) => setTimeout(r, 1000))
    execFileSync(
      'perf',
      ['record', '-q', '-e', 'cpu-clock', '-F', String(HZ), '-p', String(server.pid), '-o', data, '--', 'sleep', String(SECONDS)],
      {
        stdio: 'ignore',
      },
    )
    const rps = await rate
    lastOwnerOnly(`/tmp/perf-${server.pid}.map`)
    const report = execFileSync(
      'perf',
      ['report', '-i', data, '--stdio', '--no-children', '--sort', 'symbol', '-g', 'none', '--show-nr-samples', '--percent-limit', '0.01'],
      { encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] },
    )
    const requests = rps * SECONDS
    const symbols = new Map()
    for (const line of report.split('\n')) {
      const m = line.match(/^\s+[\d.]+%\s+(\d+)\s+\[(.)\]\s+(.*?)\s*$/)
      if (!m) continue
      const symbol = m[3].replace(/\s+-\s+-$/, '').trimEnd()
      const name =
        (m[2] === 'k' ? '[k] ' : '') + symbol.replace(/\S*node_modules\//g, '').replace(/file:\/\/\S*?\/(packages|bench)\//g, '$1/')
      symbols.set(name, (symbols.get(name) ?? 0) + ((Number(m[1]) / HZ) * 1e6) / requests)
    }
    return { rps, symbols }
  } finally {
    await stopChild(server, 10_000)
    rmSync(data, { force: true })
    rmSync(`/tmp/perf-${server.pid}.map`, { force: true })
  }
}

/**
 * Keeps, for every address in node's perf map, only the code that was there last: V8 reuses the
 * memory of collected code, and perf would name a sample after the first entry covering its address.
 */
function lastOwnerOnly(file) {
  let text
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return
  }
  const entries = text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [start, size] = line.split(' ', 2)
      return { line, start: Number.parseInt(start, 16), end: Number.parseInt(start, 16) + Number.parseInt(size, 16) }
    })
  // From the newest entry back: an entry is kept when no newer kept entry overlaps it.
  const kept = [] // sorted by start, disjoint
  const keep = []
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]
    let lo = 0
    let hi = kept.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (kept[mid].start < e.start) lo = mid + 1
      else hi = mid
    }
    const before = kept[lo - 1]
    const after = kept[lo]
    if ((before && before.end > e.start) || (after && after.start < e.end)) continue
    kept.splice(lo, 0, e)
    keep.push(e.line)
  }
  writeFileSync(file, `${keep.reverse().join('\n')}\n`)
}

const CATEGORIES = [
  ['Tollgate', (n) => /packages\/(core|fastify|express|koa)\//.test(n)],
  ['bench hook (floor, minimal)', (n) => /bench\/servers\//.test(n)],
  ['kernel', (n) => n.startsWith('[k] ')],
  ['other JavaScript (node, framework)', (n) => n.startsWith('JS:') || n.startsWith('RegExp:')],
  ['V8 builtins', (n) => n.startsWith('Builtins_')],
  ['GC', (n) => /Scaveng|Heap::|Mark|Sweep|Evacuat|RememberedSet|SlotSet|MinorMC|SemiSpace|NewSpace/.test(n)],
  ['V8 runtime', (n) => n.startsWith('v8::')],
  ['node native, libc', () => true],
]
const categoryOf = (name) => CATEGORIES.find(([, test]) => test(name))[0]

const started = Date.now()
const runs = Object.fromEntries(CASES.map((c) => [c, []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const c of round % 2 === 0 ? CASES : [...CASES].reverse()) {
    const run = await profile(c)
    runs[c].push(run)
    console.error(`${FRAMEWORK} ${c}: ${Math.round(run.rps)} req/s (${((Date.now() - started) / 60000).toFixed(1)} min)`)
  }
}

const mean = (maps) => {
  const m = new Map()
  for (const s of maps) for (const [k, v] of s) m.set(k, (m.get(k) ?? 0) + v / maps.length)
  return m
}
const byCategory = (symbols) => {
  const out = Object.fromEntries(CATEGORIES.map(([name]) => [name, 0]))
  for (const [k, v] of symbols) out[categoryOf(k)] += v
  return out
}
const f2 = (x) => x.toFixed(2)
const lines = [
  `# Server time per request by where it goes: ${FRAMEWORK}, ${values.mode === 'many' ? '10,000 clients' : values.mode === 'flood' ? 'flood (one client over its limit)' : 'one client'}`,
  '',
  `\`node bench/profile.mjs --framework ${FRAMEWORK} --cases ${CASES.join(',')} --mode ${values.mode} --rounds ${ROUNDS} --seconds ${SECONDS}\`, node ${process.version}, ${new Date().toISOString().slice(0, 16)}Z, ${((Date.now() - started) / 60000).toFixed(1)} min. Each round starts a new server per case (core 0, \`--perf-basic-prof\`), loads it with wrk -t1 -c50 (core 1, ${values.mode === 'many' ? '10,000 clients by X-Forwarded-For' : values.mode === 'flood' ? 'one client over its limit, max 10 per 60 s' : 'one client'}${redisServer ? ', a redis-server of its own on core 1 for the Redis cases' : ''}) for ${values.warm} s, then samples it with \`perf record -e cpu-clock -F ${HZ}\` for ${SECONDS} s under the same load. µs per request = samples ÷ ${HZ} ÷ requests in the window; categories are medians over rounds, symbols means. See the header of bench/profile.mjs for what a profile of this kind misattributes.`,
  '',
  `| | ${CASES.join(' | ')} |`,
  `|---|${CASES.map(() => '--:').join('|')}|`,
  `| req/s (each round) | ${CASES.map((c) => runs[c].map((r) => Math.round(r.rps).toLocaleString('en-US')).join(' / ')).join(' | ')} |`,
  `| req/s ÷ ${CASES[0]} (median) | ${CASES.map((c) => (median(runs[c].map((r) => r.rps)) / median(runs[CASES[0]].map((r) => r.rps))).toFixed(3)).join(' | ')} |`,
]
const categorized = Object.fromEntries(CASES.map((c) => [c, runs[c].map((r) => byCategory(r.symbols))]))
for (const [name] of CATEGORIES)
  lines.push(`| ${name}, µs/req | ${CASES.map((c) => f2(median(categorized[c].map((x) => x[name])))).join(' | ')} |`)
lines.push(
  `| all sampled, µs/req | ${CASES.map((c) => f2(median(runs[c].map((r) => [...r.symbols.values()].reduce((s, v) => s + v, 0))))).join(' | ')} |`,
)
const last = CASES.at(-1)
const ours = mean(runs[last].map((r) => r.symbols))
for (const other of CASES.slice(0, -1)) {
  const theirs = mean(runs[other].map((r) => r.symbols))
  const names = new Set([...ours.keys(), ...theirs.keys()])
  const diffs = [...names].map((n) => [n, (ours.get(n) ?? 0) - (theirs.get(n) ?? 0), theirs.get(n) ?? 0, ours.get(n) ?? 0])
  diffs.sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]))
  lines.push('', `## ${last} against ${other}: the ${values.top} symbols that differ most`, '')
  lines.push(`| µs/req, ${last} − ${other} | ${other} | ${last} | symbol |`, '|--:|--:|--:|---|')
  for (const [n, d, a, b] of diffs.slice(0, Number(values.top))) {
    lines.push(`| ${d >= 0 ? '+' : '−'}${f2(Math.abs(d))} | ${f2(a)} | ${f2(b)} | \`${n.slice(0, 110).replaceAll('|', '\\|')}\` |`)
  }
}
const md = `${lines.join('\n')}\n`
writeFileSync(`${OUT}.md`, md)
console.log(md)
console.error(`wrote ${relative(process.cwd(), OUT)}.md`)
await stopAll()
process.exit(0)
