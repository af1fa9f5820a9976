#!/usr/bin/env node
// What each algorithm costs the user's Redis, beside the fixed window in the same run:
//
//   npm run bench -- cost                 3 cycles (~1 min)
//   npm run bench -- cost --quick         1 cycle, 20 rounds
//   npm run bench -- cost --baseline DIR  also every algorithm with the @tollgate/core built in DIR (before/after)
//
// As a new user would run it: on a redis-server of its own, for each algorithm a Limiter with a RedisStore
// (defaults) makes 100,000 decisions over 2,000 client keys (50 rounds of 2,000 concurrent `consume`, `max`
// never reached, the default one-second window; under `concurrency` each round's slots are released before
// the next, as finished requests release theirs, the release counted in the decision's cost), then `reset`
// of every key. Per algorithm it reports the keys left (live ones: a SCAN first drops the keys whose TTL passed
// and which Redis's background expiry has not reached yet) and the keys per client key, Redis's memory for them
// (used_memory above the empty server's), the commands Redis ran per decision (INFO commandstats, a script's own commands included, EVAL/EVALSHA counted apart), Redis's CPU per
// decision (the server process's user + system time, from the scheduler's account at ns resolution, the most direct measure of what a decision costs
// the server), the app's CPU per decision (this process's, the limiter and its client, which the server's figures leave out), and the keys left after the resets. Each algorithm's figures are divided by the fixed window's of
// the same cycle; the cycles run the algorithms in alternating order and the table gives each ratio's median
// and spread. redis-server is pinned to core 1 and this process to core 0 when taskset is available. It exits 1
// when a check fails: keys per client key over 2, memory over 2× the fixed window's (the sliding log's over 4×, it
// keeps an entry per request), Redis CPU over 3× the fixed window's, or a key left after the resets.
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { describeTree, importFrom } from './lib/baseline.mjs'
import { outBase } from './lib/out.mjs'
import { canPin, cpuMicrosFine, deadline, installSignalHandlers, shutdown, startRedis } from './lib/procs.mjs'

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    cycles: { type: 'string' },
    rounds: { type: 'string' },
    clients: { type: 'string' },
    algorithms: { type: 'string' },
    baseline: { type: 'string' },
    json: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
})
const ALGORITHMS = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log', 'concurrency']
if (values.help) {
  process.stdout.write(`Usage: npm run bench -- cost [options]     (node bench/store-cost.mjs)
  --quick            1 cycle of 20 rounds (default 3 cycles of 50)
  --cycles N         cycles, each running every algorithm once
  --rounds N         rounds of concurrent consumes per algorithm (default 50)
  --clients N        client keys, one consume each per round (default 2000)
  --algorithms LIST  comma list of: ${ALGORITHMS.join(', ')} (fixed-window is always kept)
  --baseline DIR     also run each algorithm with the @tollgate/core built in DIR, as <name>@base
  --json FILE        also write the figures as JSON (default bench/out/store-cost.json)
`)
  process.exit(0)
}
const quick = values.quick === true
const cycles = Number(values.cycles ?? (quick ? 1 : 3))
const rounds = Number(values.rounds ?? (quick ? 20 : 50))
const clients = Number(values.clients ?? 2000)
const picked =
  values.algorithms === undefined ? ALGORITHMS : ['fixed-window', ...values.algorithms.split(',').filter((a) => a !== 'fixed-window')]
for (const a of picked) if (!ALGORITHMS.includes(a)) throw new Error(`unknown algorithm ${a}; expected one of ${ALGORITHMS.join(', ')}`)
const log = (...a) => console.log(...a)

installSignalHandlers()
deadline(quick ? 5 : 20, 'the cost benchmark')
if (canPin) {
  try {
    execFileSync('taskset', ['-a', '-cp', '0', String(process.pid)], { stdio: 'ignore' })
  } catch {}
}

const { Redis } = await import('ioredis')
const cores = { here: await import('@tollgate/core') }
if (values.baseline !== undefined) {
  cores.base = (await importFrom('@tollgate/core', values.baseline)).mod
  const tree = describeTree(values.baseline)
  log(`baseline: ${values.baseline} at ${tree.commit ?? '?'}${tree.dirty ? ' (with changes)' : ''}`)
}
const variants = picked.flatMap((a) =>
  cores.base === undefined
    ? [[a, 'here']]
    : [
        [a, 'here'],
        [a, 'base'],
      ],
)
const nameOf = ([a, tree]) => (tree === 'here' ? a : `${a}@base`)

const redis = await startRedis(1)
const admin = new Redis(redis.url)

/** INFO `section` as a map of its fields. */
async function info(section) {
  const text = await admin.info(section)
  return new Map(
    text
      .split('\r\n')
      .filter((l) => l.includes(':') && !l.startsWith('#'))
      .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]),
  )
}

/** Commands Redis ran since the last CONFIG RESETSTAT, scripts apart: { total, scripts, byName }. */
async function commands() {
  const byName = {}
  let total = 0
  let scripts = 0
  // Redis's own time in the commands (a script's includes the commands it calls): steadier than the process's
  // CPU, which also holds reading and writing the sockets.
  let usec = 0
  for (const [name, value] of await info('commandstats')) {
    const command = name.replace(/^cmdstat_/, '')
    if (['info', 'config|resetstat', 'dbsize', 'flushall', 'ping', 'client|setname', 'script|load', 'config|get'].includes(command))
      continue
    const calls = Number(/calls=(\d+)/.exec(value)?.[1] ?? 0)
    byName[command] = { calls, usec: Number(/usec=(\d+)/.exec(value)?.[1] ?? 0) }
    // The decisions' commands are all inside a transaction or a script, whose time includes theirs.
    if (['multi', 'exec', 'eval', 'evalsha'].includes(command)) usec += Number(/usec=(\d+)/.exec(value)?.[1] ?? 0)
    if (command === 'eval' || command === 'evalsha') scripts += calls
    else total += calls
  }
  return { total, scripts, usec, byName }
}

/**
 * Lets Redis drop the keys whose TTL has passed but which its background expiry has not reached yet: SCAN
 * deletes each expired key it visits. Without it, the keys and memory counted would include some of those,
 * as many as the expiry cycle happened to leave (the fixed window's previous windows, say), and vary from
 * run to run for reasons of Redis's own.
 */
async function reapExpired() {
  let cursor = '0'
  do {
    ;[cursor] = await admin.scan(cursor, 'COUNT', 1000)
  } while (cursor !== '0')
}

/** One algorithm's run: rounds × clients decisions, then a reset of every client key. */
async function runOne([algorithm, tree]) {
  const { Limiter, RedisStore } = cores[tree]
  await admin.flushall()
  const empty = Number((await info('memory')).get('used_memory'))
  const client = new Redis(redis.url)
  await client.ping()
  const limiter = new Limiter({
    algorithm,
    max: 1_000_000,
    prefix: 'tg:',
    store: new RedisStore({ client, timeout: '5s' }),
  })
  const keys = Array.from({ length: clients }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)
  // Warm the scripts and the connection, then start counting from a clean slate.
  await limiter.consume('warm-up')
  await limiter.reset('warm-up')
  await admin.config('RESETSTAT')
  const cpu0 = cpuMicrosFine(redis.pid)
  const app0 = process.cpuUsage()
  let refused = 0
  let fallback = 0
  for (let r = 0; r < rounds; r++) {
    const decisions = await Promise.all(keys.map((k) => limiter.consume(k)))
    for (const d of decisions) {
      if (!d.allowed) refused++
      if (d.source !== undefined && d.source !== 'store') fallback++
    }
    // A concurrency slot is held until its request ends: each is released before the next round, as an
    // app's finished requests release theirs, and the release is counted in the decision's cost.
    if (algorithm === 'concurrency') await Promise.all(decisions.filter((d) => d.allowed).map((d) => limiter.release(d)))
  }
  const cpu = cpuMicrosFine(redis.pid) - cpu0
  const app = process.cpuUsage(app0)
  const ran = await commands()
  const keysBefore = await admin.dbsize()
  await reapExpired()
  const keysLeft = await admin.dbsize()
  const memory = Number((await info('memory')).get('used_memory')) - empty
  await Promise.all(keys.map((k) => limiter.reset(k)))
  const afterReset = await admin.dbsize()
  await limiter.close?.()
  client.disconnect()
  const decisions = rounds * clients
  return {
    algorithm: nameOf([algorithm, tree]),
    decisions,
    refused,
    fallback,
    keysLeft,
    expiredKeys: keysBefore - keysLeft,
    keysPerClient: keysLeft / clients,
    memory,
    commandsPerDecision: ran.total / decisions,
    scriptsPerDecision: ran.scripts / decisions,
    cpuPerDecision: cpu / decisions,
    appCpuPerDecision: (app.user + app.system) / decisions,
    commandMicrosPerDecision: ran.usec / decisions,
    afterReset,
    byName: ran.byName,
  }
}

const runs = []
for (let c = 0; c < cycles; c++) {
  const order = c % 2 === 0 ? variants : [...variants].reverse()
  const cycle = {}
  for (const v of order) {
    const r = await runOne(v)
    cycle[r.algorithm] = r
    log(
      `cycle ${c + 1} ${r.algorithm.padEnd(20)} keys ${String(r.keysLeft).padStart(7)}  memory ${(r.memory / 1024).toFixed(0).padStart(7)} KiB` +
        `  commands/decision ${r.commandsPerDecision.toFixed(2)} (+${r.scriptsPerDecision.toFixed(3)} scripts)  Redis CPU ${r.cpuPerDecision.toFixed(2)} µs/decision (in commands ${r.commandMicrosPerDecision.toFixed(2)})` +
        `  after reset ${r.afterReset}${r.expiredKeys > 0 ? `  expired, not yet dropped ${r.expiredKeys}` : ''}${r.fallback > 0 ? `  fallback ${r.fallback}` : ''}${r.refused > 0 ? `  refused ${r.refused}` : ''}`,
    )
  }
  runs.push(cycle)
}
admin.disconnect()
await redis.stop()

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const spread = (xs) => (xs.length > 1 ? `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}` : '')

const rows = []
const failures = []
for (const v of variants) {
  const name = nameOf(v)
  const fixed = nameOf(['fixed-window', v[1]])
  const of = (f) => runs.map((cycle) => f(cycle[name], cycle[fixed]))
  const memRatio = of((r, b) => r.memory / b.memory)
  const cpuRatio = of((r, b) => r.cpuPerDecision / b.cpuPerDecision)
  const row = {
    algorithm: name,
    keysPerClient: median(of((r) => r.keysPerClient)),
    memoryKiB: median(of((r) => r.memory / 1024)),
    memoryRatio: median(memRatio),
    memorySpread: spread(memRatio),
    commandsPerDecision: median(of((r) => r.commandsPerDecision)),
    scriptsPerDecision: median(of((r) => r.scriptsPerDecision)),
    cpuPerDecision: median(of((r) => r.cpuPerDecision)),
    appCpuPerDecision: median(of((r) => r.appCpuPerDecision)),
    cpuRatio: median(cpuRatio),
    cpuSpread: spread(cpuRatio),
    commandMicrosPerDecision: median(of((r) => r.commandMicrosPerDecision)),
    commandRatio: median(of((r, b) => r.commandMicrosPerDecision / b.commandMicrosPerDecision)),
    afterReset: Math.max(...of((r) => r.afterReset)),
    fallback: of((r) => r.fallback).reduce((a, b) => a + b, 0),
  }
  rows.push(row)
  if (v[1] !== 'here') continue
  const memLimit = v[0] === 'sliding-log' || v[0] === 'concurrency' ? 4 : 2
  if (row.keysPerClient > 2) failures.push(`${name}: ${row.keysPerClient} keys per client key (at most 2)`)
  if (row.memoryRatio > memLimit) failures.push(`${name}: memory ${row.memoryRatio.toFixed(2)}× the fixed window's (at most ${memLimit}×)`)
  if (row.cpuRatio > 3) failures.push(`${name}: Redis CPU ${row.cpuRatio.toFixed(2)}× the fixed window's per decision (at most 3×)`)
  if (row.afterReset > 0) failures.push(`${name}: ${row.afterReset} keys left after reset of every key`)
}

const header =
  `${rounds * clients} decisions over ${clients} client keys (${rounds} rounds of ${clients} concurrent consume), ` +
  `then reset of every key; ${cycles} cycle(s), medians (spread over cycles)`
const table = [
  '| algorithm | keys per client key | memory | × fixed window | commands per decision (+ scripts) | Redis CPU per decision | × fixed window | in commands | × fixed window | app CPU per decision | keys after reset |',
  '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ...rows.map(
    (r) =>
      `| ${r.algorithm} | ${r.keysPerClient.toFixed(2)} | ${r.memoryKiB.toFixed(0)} KiB | ${r.memoryRatio.toFixed(2)}${r.memorySpread ? ` (${r.memorySpread})` : ''} | ` +
      `${r.commandsPerDecision.toFixed(2)} (+${r.scriptsPerDecision.toFixed(3)}) | ${r.cpuPerDecision.toFixed(2)} µs | ${r.cpuRatio.toFixed(2)}${r.cpuSpread ? ` (${r.cpuSpread})` : ''} | ${r.commandMicrosPerDecision.toFixed(2)} µs | ${r.commandRatio.toFixed(2)} | ${r.appCpuPerDecision.toFixed(2)} µs | ${r.afterReset} |`,
  ),
]
log('')
log(header)
log(table.join('\n'))
const json = values.json ?? `${outBase('store-cost')}.json`
writeFileSync(json, `${JSON.stringify({ header, rows, runs }, null, 2)}\n`)
log(`\nwrote ${json}`)
if (failures.length > 0) {
  log(`\nchecks failed:\n- ${failures.join('\n- ')}`)
  await shutdown(1)
}
log('checks passed: keys per client key ≤ 2, memory ≤ 2× (logs ≤ 4×), Redis CPU ≤ 3× the fixed window, nothing left after reset')
await shutdown(0)
