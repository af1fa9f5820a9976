#!/usr/bin/env node
// Store micro-benchmark: rate-limit decisions per second through Redis, no HTTP.
//
//   node bench/store-bench.mjs            3 cycles x 3 s per variant (~1 min)
//   node bench/store-bench.mjs --quick    2 cycles x 1 s per variant
//
// Many concurrent async callers (default 200) each loop: pick one of N keys (default 10,000) at
// random, make one decision, repeat, for a fixed time. Variants, interleaved (forward, then reverse)
// over several cycles against one private redis-server:
//   plain       client.multi().incrby(key, 1).pexpire(key, ttl).exec() per decision (the textbook way)
//   tollgate    Tollgate's RedisStore.increment() with { transport: 'own-connection' }: batching on, the
//               transactions on the store's own connection (stores/redis/own-connection.ts)
//   tollgate-nobatch  RedisStore with { batch: false, transport: 'own-connection' }: one MULTI/EXEC round trip per decision
//   tollgate-client   RedisStore with { transport: 'direct' }: the transactions written straight onto the
//               client's connection (stores/redis/direct-writer.ts)
//   tollgate-multi    RedisStore with its default options: the transactions through client.multi()
//   floor       the ioredis floor: the same transactions Tollgate sends (the decisions of one event-loop
//               turn, up to 64 keys, in one MULTI with INCRBY + PEXPIRE per key), issued by hand with
//               nothing else: no merging, no deadline, one resolve per decision, through multi([...])
//   floor-chained  the same, built through ioredis's chained API (multi().incrby().pexpire()...)
//   floor-direct   the same commands as ioredis Commands through client.sendCommand into one write,
//               as Tollgate sends them on a standalone client (packages/core/src/stores/redis/direct-writer.ts):
//               the cheapest way to send this transaction through ioredis that this bench knows
//   floor-raw      the same bytes on a socket of its own (node:net), no client library: the replies read
//               by a parser that knows only this transaction's shape. Not a usable client (no reconnect,
//               auth, TLS or error recovery); it shows what this transaction costs in Node at all, so
//               that what ioredis adds on top of it (floor-direct) can be told apart
// With --baseline DIR (a built checkout of Tollgate), tollgate and tollgate-nobatch each get a twin,
// tollgate@base and tollgate-nobatch@base: the same RedisStore from DIR's @tollgate/core, measured in
// the same interleaved cycles, and a before/after table of their ratios to plain is printed.
// This process is pinned to core 0 and redis-server to core 1 when taskset is available.
import { execFileSync } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { join, relative, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { BASE_SUFFIX, describeTree, importFrom } from './lib/baseline.mjs'
import { outBase } from './lib/out.mjs'
import { canPin, checkTools, cpuMicros, deadline, installSignalHandlers, shutdown, startRedis } from './lib/procs.mjs'

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    cycles: { type: 'string' },
    seconds: { type: 'string' },
    callers: { type: 'string' },
    keys: { type: 'string' },
    'window-ms': { type: 'string' },
    variants: { type: 'string' },
    json: { type: 'string' },
    baseline: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
})
if (values.help) {
  process.stdout.write(`Usage: node bench/store-bench.mjs [options]
  --quick            2 cycles x 1 s (default 3 cycles x 3 s)      BENCH_QUICK=1
  --cycles N         cycles (each runs every variant once)        BENCH_CYCLES
  --seconds S        seconds per variant per cycle                BENCH_SECONDS
  --callers N        concurrent async callers (default 200)       BENCH_CALLERS
  --keys N           distinct keys (default 10000)                BENCH_KEYS
  --window-ms MS     fixed window length (default 1000)
  --variants LIST    plain,tollgate,tollgate-nobatch,tollgate-client,tollgate-multi,floor,floor-chained,floor-direct,floor-raw (default all)
  --json NAME        also write the raw numbers to bench/out/NAME.json, which git ignores
                     (a path with a / is used as given)
  --baseline DIR     before/after: also run tollgate and tollgate-nobatch with the RedisStore
                     of DIR's @tollgate/core (a built checkout), as <variant>@base   BENCH_BASELINE
`)
  process.exit(0)
}
const env = process.env
const quick = values.quick ?? ['1', 'true', 'yes'].includes(String(env.BENCH_QUICK ?? '').toLowerCase())
const cfg = {
  cycles: Number(values.cycles ?? env.BENCH_CYCLES ?? (quick ? 2 : 3)),
  seconds: Number(values.seconds ?? env.BENCH_SECONDS ?? (quick ? 1 : 3)),
  callers: Number(values.callers ?? env.BENCH_CALLERS ?? 200),
  keys: Number(values.keys ?? env.BENCH_KEYS ?? 10000),
  windowMs: Number(values['window-ms'] ?? 1000),
  variants: (values.variants ?? 'plain,tollgate,tollgate-nobatch,tollgate-client,tollgate-multi,floor,floor-chained,floor-direct,floor-raw')
    .split(',')
    .map((s) => s.trim()),
}
const baselineDir = values.baseline ?? env.BENCH_BASELINE ?? ''
if (baselineDir) {
  cfg.baseline = resolve(baselineDir)
  if (!existsSync(join(cfg.baseline, 'package.json'))) {
    process.stderr.write(`--baseline ${baselineDir}: no package.json in ${cfg.baseline} (want a Tollgate checkout, built)\n`)
    process.exit(2)
  }
}
for (const k of ['cycles', 'seconds', 'callers', 'keys', 'windowMs']) {
  if (!(cfg[k] > 0)) {
    process.stderr.write(`${k} must be a positive number\n`)
    process.exit(2)
  }
}
const log = (s = '') => process.stderr.write(`${s}\n`)

installSignalHandlers()
checkTools(['redis-server'])
deadline(Math.max(5, (cfg.cycles * cfg.variants.length * (cfg.baseline ? 2 : 1) * (cfg.seconds + 1) * 2) / 60 + 2), 'the store benchmark')

if (canPin) {
  try {
    execFileSync('taskset', ['-a', '-cp', '0', String(process.pid)], { stdio: 'ignore' })
  } catch {
    log('warning: could not pin this process to core 0')
  }
}

const { Redis, Command } = await import('ioredis')
let core = null
let coreWhy = null
try {
  core = await import('@tollgate/core')
  if (typeof core.RedisStore !== 'function') throw Object.assign(new Error('no RedisStore export'), { code: 'NO_EXPORT' })
} catch (err) {
  core = null
  coreWhy = `@tollgate/core is not usable (${err.code ?? err.message}): run \`npm run build\` (and \`npm install\` if node_modules/@tollgate/core is missing)`
}
let variants = cfg.variants.filter((v) =>
  [
    'plain',
    'tollgate',
    'tollgate-nobatch',
    'tollgate-client',
    'tollgate-multi',
    'floor',
    'floor-chained',
    'floor-direct',
    'floor-raw',
  ].includes(v),
)
let baseCore = null
let baseWhy = null
let trees = null
if (cfg.baseline) {
  trees = { before: describeTree(cfg.baseline), after: describeTree(new URL('..', import.meta.url).pathname) }
  try {
    const b = await importFrom('@tollgate/core', cfg.baseline)
    if (typeof b.mod.RedisStore !== 'function') throw Object.assign(new Error('no RedisStore export'), { code: 'NO_EXPORT' })
    baseCore = b.mod
    trees.before.core = b.dir
    log(`before/after: the @base variants use @tollgate/core from ${b.dir} (${trees.before.text}); the others from ${trees.after.text}`)
  } catch (err) {
    baseWhy = `@tollgate/core from ${cfg.baseline} is not usable (${err.code ?? err.message}): run \`npm ci && npm run build\` there`
    log(`note: skipping the baseline variants: ${baseWhy}`)
  }
  if (baseCore) variants = variants.flatMap((v) => (v.startsWith('tollgate') ? [v, `${v}${BASE_SUFFIX}`] : [v]))
}
if (!core) {
  log(`note: skipping the Tollgate variants: ${coreWhy}`)
  variants = variants.filter((v) => !v.startsWith('tollgate') || v.endsWith(BASE_SUFFIX))
}

const redis = await startRedis(1)
log(`redis-server pid ${redis.pid} on ${redis.url}`)
const admin = new Redis(redis.url)
admin.on('error', () => {})
const clients = {}
const makers = {}
for (const v of variants) {
  const client = new Redis(redis.url)
  client.on('error', () => {}) // on Ctrl-C the server goes first; failed calls are counted as errors anyway
  await client.ping()
  clients[v] = client
  const ttl = cfg.windowMs * 2
  if (v === 'plain') {
    makers[v] = (i) => {
      const key = `bench:plain:{k${i}}:${Math.floor(Date.now() / cfg.windowMs)}`
      return client.multi().incrby(key, 1).pexpire(key, ttl).exec()
    }
  } else if (v.startsWith('floor')) {
    makers[v] = floorMaker(client, `bench:${v}:`, ttl, v.slice('floor-'.length))
  } else {
    const base = v.endsWith(BASE_SUFFIX)
    const transport = v.startsWith('tollgate-multi') ? 'client' : v.startsWith('tollgate-client') ? 'direct' : 'own-connection'
    const options = { client, ...(v.startsWith('tollgate-nobatch') ? { batch: false } : {}) }
    const { RedisStore } = base ? baseCore : core
    let store
    try {
      store = new RedisStore({ ...options, transport })
    } catch (error) {
      // A baseline from before `transport`: its default wrote directly, `ownConnection` opened its own.
      if (error?.code !== 'TG_UNKNOWN_OPTION' || transport === 'client') throw error
      store = new RedisStore({ ...options, ...(transport === 'own-connection' ? { ownConnection: true } : {}) })
    }
    // The store's own connection opens once the client is ready: measure from when it is in use.
    if (!base && !v.startsWith('tollgate-client') && !v.startsWith('tollgate-multi')) await waitForOwnConnection(admin)
    makers[v] = (i) => store.increment(`bench:${v}:{k${i}}`, 1, cfg.windowMs, Date.now())
  }
}

/** Waits (at most 2 s) until a store's own connection shows in CLIENT LIST, named `tollgate`. */
async function waitForOwnConnection(admin) {
  const until = Date.now() + 2000
  while (Date.now() < until && !/ name=tollgate /.test(await admin.client('LIST'))) await new Promise((r) => setTimeout(r, 10))
}

/**
 * The ioredis floor (see the header): decisions of one event-loop turn queue up and go out as one
 * MULTI/EXEC with INCRBY + PEXPIRE per key, at most 64 keys (Tollgate's MAX_BATCH_KEYS) per transaction.
 */
function floorMaker(client, prefix, ttl, how) {
  const raw = how === 'raw' ? rawConnection(redis.url) : undefined
  let keys = []
  let waiting = []
  let scheduled = false
  const ttlArg = String(ttl)
  const flush = () => {
    scheduled = false
    const batchKeys = keys
    const batch = waiting
    keys = []
    waiting = []
    let reply
    if (how === 'direct') reply = sendDirect(client, batchKeys, ttlArg)
    else if (how === 'raw') reply = raw.send(batchKeys, ttlArg)
    else if (how === 'chained') {
      const m = client.multi()
      for (const k of batchKeys) m.incrby(k, '1').pexpire(k, ttlArg)
      reply = m.exec()
    } else {
      const commands = []
      for (const k of batchKeys) commands.push(['incrby', k, '1'], ['pexpire', k, ttlArg])
      reply = client.multi(commands).exec()
    }
    reply.then(
      (results) => {
        for (let i = 0; i < batch.length; i++) {
          const [err, value] = results[2 * i]
          if (err) batch[i].reject(err)
          else batch[i].resolve(Number(value))
        }
      },
      (err) => {
        for (const w of batch) w.reject(err)
      },
    )
  }
  return (i) =>
    new Promise((resolve, reject) => {
      keys.push(`${prefix}{k${i}}:${Math.floor(Date.now() / cfg.windowMs)}`)
      waiting.push({ resolve, reject })
      if (keys.length >= 64) flush()
      else if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    })
}

/** MULTI, INCRBY + PEXPIRE per key, EXEC as ioredis Commands written in one string; the replies as ioredis's pairs. */
function sendDirect(client, keys, ttlArg) {
  const noop = () => {}
  let data = ''
  let pending = 2 * keys.length + 2
  const stream = {
    isPipeline: true,
    destination: { redis: client },
    write(w) {
      data += w
      if (--pending === 0) client.stream.write(data)
    },
  }
  client.sendCommand(new Command('multi', [], undefined, noop), stream)
  for (const k of keys) {
    client.sendCommand(new Command('incrby', [k, '1'], undefined, noop), stream)
    client.sendCommand(new Command('pexpire', [k, ttlArg], undefined, noop), stream)
  }
  const exec = new Command('exec')
  client.sendCommand(exec, stream)
  return exec.promise.then((replies) => replies.map((r) => (r instanceof Error ? [r, null] : [null, r])))
}

/**
 * floor-raw's connection: MULTI, INCRBY + PEXPIRE per key, EXEC written as RESP on a socket of its
 * own, and the replies read line by line. Every reply of this transaction is one line: +OK, a
 * +QUEUED per command, then EXEC's array header and an integer per command; the INCRBY counts are
 * the even ones after the header. A line starting with "-" (an error) fails the transaction.
 */
function rawConnection(url) {
  const { hostname, port } = new URL(url)
  const socket = net.connect(Number(port), hostname)
  socket.setNoDelay(true)
  socket.setEncoding('latin1')
  socket.on('error', () => {})
  const queue = [] // transactions sent, oldest first: { keys, lines, resolve, reject, pairs, failed }
  let buffer = ''
  socket.on('data', (chunk) => {
    buffer += chunk
    let at = 0
    for (;;) {
      const end = buffer.indexOf('\r\n', at)
      if (end < 0) break
      const t = queue[0]
      const line = t.lines++
      const k = t.keys
      if (buffer.charCodeAt(at) === 45) t.failed ??= new Error(buffer.slice(at + 1, end))
      else if (line > 2 * k + 1 && (line - 2 * k - 2) % 2 === 0) t.pairs.push([null, Number(buffer.slice(at + 1, end))], [null, 1])
      at = end + 2
      if (t.lines === 4 * k + 2) {
        queue.shift()
        if (t.failed) t.reject(t.failed)
        else t.resolve(t.pairs)
      }
    }
    buffer = at === buffer.length ? '' : buffer.slice(at)
  })
  const bulk = (s) => `$${s.length}\r\n${s}\r\n`
  return {
    send(keys, ttlArg) {
      let out = '*1\r\n$5\r\nMULTI\r\n'
      for (const key of keys) out += `*3\r\n$6\r\nINCRBY\r\n${bulk(key)}$1\r\n1\r\n*3\r\n$7\r\nPEXPIRE\r\n${bulk(key)}${bulk(ttlArg)}`
      out += '*1\r\n$4\r\nEXEC\r\n'
      socket.write(out)
      return new Promise((resolve, reject) => queue.push({ keys: keys.length, lines: 0, resolve, reject, pairs: [], failed: undefined }))
    },
    close: () => socket.destroy(),
  }
}

function parseInfo(text) {
  let calls = 0
  let reads = 0
  for (const line of text.split('\n')) {
    const m = line.match(/^cmdstat_([^:]+):calls=(\d+)/)
    if (m && m[1] !== 'info') calls += Number(m[2])
    const r = line.match(/^total_reads_processed:(\d+)/)
    if (r) reads = Number(r[1])
  }
  return { calls, reads }
}

/** Run one variant for cfg.seconds with cfg.callers concurrent callers. */
async function run(v, seconds) {
  const decide = makers[v]
  const stopAt = performance.now() + seconds * 1000
  let decisions = 0
  let errors = 0
  let firstError = null
  const keys = cfg.keys
  async function caller() {
    while (performance.now() < stopAt) {
      try {
        await decide((Math.random() * keys) | 0)
        decisions++
      } catch (err) {
        errors++
        firstError ??= err
      }
    }
  }
  const i0 = parseInfo(await admin.info('stats', 'commandstats'))
  const cpu0 = process.cpuUsage()
  const r0 = cpuMicros(redis.pid)
  const t0 = performance.now()
  await Promise.all(Array.from({ length: cfg.callers }, caller))
  const elapsed = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const r1 = cpuMicros(redis.pid)
  const i1 = parseInfo(await admin.info('stats', 'commandstats'))
  const n = Math.max(1, decisions)
  return {
    variant: v,
    decisions,
    errors,
    firstError: firstError ? String(firstError.message ?? firstError) : null,
    seconds: elapsed,
    perSecond: decisions / elapsed,
    nodeUsPerDecision: (cpu.user + cpu.system) / n,
    redisUsPerDecision: (r1 - r0) / n,
    redisCommandsPerDecision: (i1.calls - i0.calls) / n,
    redisReadsPerDecision: (i1.reads - i0.reads - 1) / n,
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const h = s.length >> 1
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2
}

log(
  `store bench: ${variants.join(', ')}; ${cfg.callers} callers over ${cfg.keys} keys, ${cfg.windowMs} ms windows; ` +
    `${cfg.cycles} cycles x ${cfg.seconds} s per variant`,
)
for (const v of variants) await run(v, Math.min(1, cfg.seconds)) // warm-up
const results = []
for (let c = 0; c < cfg.cycles; c++) {
  const order = c % 2 ? [...variants].reverse() : variants
  const line = []
  for (const v of order) {
    const r = { cycle: c, ...(await run(v, cfg.seconds)) }
    results.push(r)
    line.push(`${v} ${Math.round(r.perSecond).toLocaleString('en-US')}/s${r.errors ? ` (${r.errors} errors)` : ''}`)
  }
  log(`  cycle ${c + 1}/${cfg.cycles} ${c % 2 ? '<-' : '->'} ${line.join(', ')}`)
}

const f = (n, d = 1) => (n == null ? '–' : n.toFixed(d))
const out = []
out.push(
  `| variant | decisions/s (median) | × plain (median, min…max) | node µs/decision | Redis µs/decision | Redis cmd/decision | Redis reads/decision | errors |`,
)
out.push('|---|--:|--:|--:|--:|--:|--:|--:|')
const summary = {}
for (const v of variants) {
  const rs = results.filter((r) => r.variant === v)
  const ratios = rs
    .map((r) => {
      const p = results.find((x) => x.variant === 'plain' && x.cycle === r.cycle)
      return p ? r.perSecond / p.perSecond : null
    })
    .filter((x) => x != null)
  const s = {
    perSecond: median(rs.map((r) => r.perSecond)),
    ratio: ratios.length ? { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) } : null,
    nodeUs: median(rs.map((r) => r.nodeUsPerDecision)),
    redisUs: median(rs.map((r) => r.redisUsPerDecision)),
    cmds: median(rs.map((r) => r.redisCommandsPerDecision)),
    reads: median(rs.map((r) => r.redisReadsPerDecision)),
    errors: rs.reduce((a, r) => a + r.errors, 0),
    firstError: rs.find((r) => r.firstError)?.firstError ?? null,
  }
  summary[v] = s
  const ratio = v === 'plain' ? '1' : s.ratio ? `${f(s.ratio.median, 2)} (${f(s.ratio.min, 2)}…${f(s.ratio.max, 2)})` : '–'
  out.push(
    `| ${v} | ${Math.round(s.perSecond).toLocaleString('en-US')} | ${ratio} | ${f(s.nodeUs)} | ${f(s.redisUs)} | ${f(s.cmds, 2)} | ${f(s.reads, 3)} | ${s.errors ? `${s.errors}: ${s.firstError}` : 0} |`,
  )
}
if (!core) out.push(`\nTollgate variants skipped: ${coreWhy}`)
if (baseWhy) out.push(`\nBaseline variants skipped: ${baseWhy}`)

// Before/after: each Tollgate variant's ratio to plain (per cycle), from the baseline and from this tree.
const beforeAfter = []
for (const v of variants) {
  if (!v.endsWith(BASE_SUFFIX) || !summary[v.slice(0, -BASE_SUFFIX.length)]) continue
  const name = v.slice(0, -BASE_SUFFIX.length)
  const before = summary[v].ratio
  const after = summary[name].ratio
  if (!before || !after) continue
  const delta = after.median - before.median
  const spread = Math.max(before.max - before.min, after.max - after.min)
  const verdict = -delta > spread ? 'slower' : delta > spread ? 'faster' : 'within spread'
  beforeAfter.push({ variant: name, before, after, delta, deltaShare: delta / before.median, spread, verdict })
}
if (beforeAfter.length) {
  const r3 = (x) => `${f(x.median, 3)} (${f(x.min, 3)}…${f(x.max, 3)})`
  const sg = (n, d) => `${n >= 0 ? '+' : '−'}${Math.abs(n).toFixed(d)}`
  out.push('')
  out.push(`Before → after (× plain, per cycle): before = ${trees.before.text}; after = ${trees.after.text}.`)
  out.push('spread: the wider of the two min…max ranges; a drop of the median larger than that is **slower**.')
  out.push('')
  out.push('| variant | before × plain | after × plain | Δ | spread | verdict |')
  out.push('|---|--:|--:|--:|--:|---|')
  for (const r of beforeAfter) {
    out.push(
      `| ${r.variant} | ${r3(r.before)} | ${r3(r.after)} | ${sg(r.delta, 3)} (${sg(r.deltaShare * 100, 1)}%) | ${f(r.spread, 3)} | ${r.verdict === 'slower' ? '**slower**' : r.verdict} |`,
    )
  }
}
process.stdout.write(`\n${out.join('\n')}\n`)
if (values.json) {
  const extra = trees ? { trees, beforeAfter } : {}
  const path = `${outBase(values.json.replace(/\.json$/, ''))}.json`
  writeFileSync(
    path,
    `${JSON.stringify({ date: new Date().toISOString(), node: process.version, config: cfg, results, summary, ...extra }, null, 1)}\n`,
  )
  log(`wrote ${relative(process.cwd(), path)}`)
}

admin.disconnect()
for (const c of Object.values(clients)) c.disconnect()
await redis.stop()
await shutdown(0)
