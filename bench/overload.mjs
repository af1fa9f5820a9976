#!/usr/bin/env node
// Overload: what each way of protecting a service does when it is offered three times what it can serve.
//
//   npm run bench -- overload              60 s per case (~5 min): writes bench/OVERLOAD.md and bench/OVERLOAD.svg
//   npm run bench -- overload --quick      12 s per case (~1 min), to bench/out/
//   npm run bench -- overload --steady     Tollgate at half the capacity for 300 s (--quick: 30 s): every refusal counted
//
// The service (bench/overload-server.mjs) serves CAPACITY requests at a time, 15 to 25 ms each; its capacity halves
// half-way through the run (a failed replica, a slower database). The load is open: requests are sent at a fixed
// rate, three times the first capacity, whatever the answers, and each one's latency runs from when it was due, so
// a server that falls behind is not excused by a load generator that waits for it. 20% of the requests are
// critical, 50% normal, 30% sheddable (the `x-priority` header). Side by side: no protection, a static cap on
// requests in flight set at the first capacity, @fastify/under-pressure (event-loop delay and utilisation), and
// Tollgate's adaptiveConcurrency. Per case and phase (from 5 s after each step): admitted p50 and p99, goodput
// (answers within 1 s per second, against the capacity), refusals by class; the unloaded p99 comes from a run at
// half the first capacity, which does not halve, with no protection. --steady offers Tollgate that half load alone
// for five minutes, the same mix of classes: a gate that refuses anything there is acting on an overload that is not.
// This process notes how late it sent each request: one that fell behind (a busy core) sends what it owes at once,
// and the refusals that burst brings are counted apart. The server is pinned to core 0 and this process to core 1 when taskset is
// available. Tollgate's limit and latency over time are drawn in the SVG.
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { BENCH_DIR, outBase } from './lib/out.mjs'
import { canPin, deadline, freePort, installSignalHandlers, pinned, shutdown, spawnTracked, stopChild, waitForLine } from './lib/procs.mjs'

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    steady: { type: 'boolean' },
    seconds: { type: 'string' },
    capacity: { type: 'string', default: '16' },
    cases: { type: 'string' },
    out: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
})
const CASES = ['none', 'static', 'under-pressure', 'tollgate']
if (values.help) {
  process.stdout.write(`Usage: npm run bench -- overload [--quick] [--steady] [--seconds N] [--capacity N] [--cases LIST] [--out NAME]
  --steady         Tollgate alone at half the capacity, which does not halve: refusals (there should be none) and
                   p50/p99, to the terminal and bench/out/overload-steady.md (or --out)
  --seconds N      seconds per case (default 60, quick 12; --steady 300, quick 30); the capacity halves half-way
  --capacity N     requests the service serves at once before it halves (default 16)
  --cases LIST     comma list of: ${CASES.join(', ')}
  --out NAME       write NAME.md and NAME.svg (default: bench/OVERLOAD.md and bench/OVERLOAD.svg; quick: bench/out/overload)
`)
  process.exit(0)
}
const quick = values.quick === true
const steady = values.steady === true
const seconds = Number(values.seconds ?? (steady ? (quick ? 30 : 300) : quick ? 12 : 60))
const capacity = Number(values.capacity)
const cases = values.cases?.split(',') ?? CASES
const SERVICE_MS = 20
const perSecond = (capacity * 1000) / SERVICE_MS
const MIX = ['critical', 'normal', 'sheddable', 'normal', 'sheddable', 'normal', 'critical', 'normal', 'sheddable', 'normal']
const GOOD_MS = 1000
const GIVE_UP_MS = 2000
/** A request sent this much after it was due was sent in a burst: this process had fallen behind (a busy core). */
const BEHIND_MS = 20
const BURST_MS = 250

installSignalHandlers()
deadline(Math.ceil((seconds * (steady ? 1 : cases.length + 1) + 60) / 60) + 2, 'the overload benchmark')
if (canPin) {
  try {
    execFileSync('taskset', ['-a', '-cp', '1', String(process.pid)], { stdio: 'ignore' })
  } catch {}
}

/** One case's run: the server started, `rate` requests a second for `secs`, every answer recorded; the capacity halves half-way if `halve`. */
async function runCase(name, rate, secs, halve = true) {
  const port = await freePort()
  const start = Date.now() + 1500
  const halveAt = halve ? start + (secs * 1000) / 2 : Number.POSITIVE_INFINITY
  const [cmd, args] = pinned(0, process.execPath, [
    join(BENCH_DIR, 'overload-server.mjs'),
    name,
    String(port),
    String(capacity),
    String(halveAt),
  ])
  const server = spawnTracked(`overload ${name}`, cmd, args, { cwd: BENCH_DIR })
  await waitForLine(server, /^listening/, 15_000, `overload ${name}`)
  const gate = []
  let buf = ''
  server.stdout.on('data', (d) => {
    buf += d
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 1)
      if (line.startsWith('{')) gate.push(JSON.parse(line))
    }
  })
  const agent = new Agent({ keepAlive: true, maxSockets: 1024 })
  const results = []
  while (Date.now() < start) await new Promise((r) => setTimeout(r, 5))
  const end = start + secs * 1000
  let sent = 0
  await new Promise((resolve) => {
    let pending = 0
    let done = false
    const send = (due) => {
      const priority = MIX[sent++ % MIX.length]
      // How late this process sent it: a load generator that fell behind sends what it owes at once, a burst.
      const late = Math.round(Date.now() - due)
      pending++
      let finished = false
      const req = request({ host: '127.0.0.1', port, path: '/', agent, headers: { 'x-priority': priority } }, (res) => {
        res.resume()
        res.on('error', () => {})
        res.on('end', () => {
          finished = true
          results.push({ due: due - start, ms: Math.round(Date.now() - due), status: res.statusCode, priority, late })
          if (--pending === 0 && done) resolve()
        })
      })
      req.on('error', () => {
        if (finished) return
        results.push({ due: due - start, ms: Math.round(Date.now() - due), status: 0, priority, late })
        if (--pending === 0 && done) resolve()
      })
      // A client gives up after GIVE_UP_MS from when its request was due, waiting for a socket included: an
      // unprotected server's backlog then stays bounded, and so does the run.
      const timer = setTimeout(() => req.destroy(), GIVE_UP_MS)
      req.on('close', () => clearTimeout(timer))
      req.end()
    }
    const tick = () => {
      const now = Date.now()
      const owed = Math.floor(((Math.min(now, end) - start) * rate) / 1000)
      while (sent < owed) send(start + (sent * 1000) / rate)
      if (now < end) setTimeout(tick, 1)
      else {
        done = true
        if (pending === 0) resolve()
      }
    }
    tick()
  })
  agent.destroy()
  await stopChild(server)
  return { name, results, gate: gate.map((g) => ({ ...g, t: g.t - start })), secs }
}

const quantile = (xs, q) => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(s.length * q))]
}

/** A phase's figures: from 5 s after its step to its end. */
function phase(run, from, to, cap) {
  const rs = run.results.filter((r) => r.due >= from && r.due < to)
  const ok = rs.filter((r) => r.status === 200)
  const good = ok.filter((r) => r.ms <= GOOD_MS)
  const refused = rs.filter((r) => r.status !== 200)
  const byClass = Object.fromEntries(['critical', 'normal', 'sheddable'].map((c) => [c, refused.filter((r) => r.priority === c).length]))
  const critical = rs.filter((r) => r.priority === 'critical')
  return {
    p50: quantile(
      ok.map((r) => r.ms),
      0.5,
    ),
    p99: quantile(
      ok.map((r) => r.ms),
      0.99,
    ),
    goodput: good.length / ((to - from) / 1000) / ((cap * 1000) / SERVICE_MS),
    refused: refused.length,
    byClass,
    // A critical or normal request refused while sheddable ones were admitted (in the same 100 ms) was refused out of
    // order; one refused when no sheddable request got through had no sheddable request to be refused instead.
    sheddableShare: refused.length === 0 ? 1 : 1 - misordered(rs, refused) / refused.length,
    criticalServed: critical.length === 0 ? 1 : critical.filter((r) => r.status === 200 && r.ms <= GOOD_MS).length / critical.length,
  }
}

/**
 * How long after a step (from) Tollgate's limit settled: the end of the last second, of the phase's rolling
 * one-second medians, more than a quarter off the median of its last 10 s. A median over a second passes over
 * the probes (two intervals at half the limit). Undefined for a case without a gate.
 */
function settledAfter(run, from, to) {
  const samples = run.gate.filter((g) => g.t >= from && g.t < to)
  if (samples.length === 0) return undefined
  const median = (xs) => quantile(xs, 0.5)
  const final = median(samples.filter((g) => g.t >= to - 10_000).map((g) => g.limit))
  let last = from
  for (let t = from; t + 1000 <= to; t += 100) {
    const m = median(samples.filter((g) => g.t >= t && g.t < t + 1000).map((g) => g.limit))
    if (Number.isFinite(m) && Math.abs(m - final) > final / 4) last = t + 1000
  }
  return last - from
}

/** Refusals of a higher class in a 100 ms span in which a sheddable request was admitted. */
function misordered(rs, refused) {
  const admittedSheddable = new Set(rs.filter((r) => r.status === 200 && r.priority === 'sheddable').map((r) => Math.floor(r.due / 100)))
  return refused.filter((r) => r.priority !== 'sheddable' && admittedSheddable.has(Math.floor(r.due / 100))).length
}

const log = (...a) => console.log(...a)
if (steady) {
  log(`service: ${capacity} at a time, 15-25 ms each; offered ${perSecond / 2} requests/s (half its capacity) for ${seconds} s`)
  const run = await runCase('tollgate', perSecond / 2, seconds, false)
  const ok = run.results.filter((r) => r.status === 200).map((r) => r.ms)
  const refused = run.results.filter((r) => r.status !== 200)
  const byClass = ['critical', 'normal', 'sheddable'].map((c) => refused.filter((r) => r.priority === c).length).join(' / ')
  const behind = run.results.filter((r) => r.late > BEHIND_MS)
  // A refusal within BURST_MS after a request this process sent late came of the burst it sent on catching up: a
  // moment of several times the capacity, not half of it. Counted apart, and shown.
  const inBurst = refused.filter((r) => behind.some((b) => b.due <= r.due && r.due - b.due <= BURST_MS))
  // Each refusal with the gate as it was around it (its samples every 100 ms), for whoever reads the terminal.
  for (const r of refused.slice(0, 10)) {
    const around = run.gate.filter((g) => Math.abs(g.t - r.due) <= 400)
    log(`refused ${r.priority} due at ${(r.due / 1000).toFixed(3)} s after ${r.ms} ms (sent ${r.late} ms late); the gate around it:`)
    for (const g of around)
      log(
        `  ${(g.t / 1000).toFixed(1)} s: limit ${g.limit}, in flight ${g.inflight}, queued ${g.queued}, latency ${g.latency?.toFixed(1)} ms, baseline ${g.baseline?.toFixed(1)} ms`,
      )
  }
  const line =
    `half the capacity (${perSecond / 2} requests/s) for ${seconds} s: ${run.results.length} requests, refused ${refused.length} ` +
    `(critical / normal / sheddable ${byClass}; ${refused.length - inBurst.length} with the load generator on time), ` +
    `admitted p50 ${quantile(ok, 0.5)} p99 ${quantile(ok, 0.99)} ms; the load generator fell behind ${BEHIND_MS} ms ` +
    `for ${behind.length} requests (at most ${Math.max(0, ...run.results.map((r) => r.late))} ms)`
  log(`tollgate        ${line}`)
  const base = outBase(values.out ?? 'overload-steady')
  writeFileSync(
    `${base}.md`,
    `# Overload benchmark, steady\n\n\`npm run bench -- overload --steady${quick ? ' --quick' : ''}\`: Tollgate in front of a service that serves ${capacity} requests at a time (15 to 25 ms each), ${line}.\n`,
  )
  log(`wrote ${base}.md`)
  await shutdown(refused.length === inBurst.length ? 0 : 1)
}
log(
  `service: ${capacity} at a time, 15-25 ms each, halved after ${seconds / 2} s; offered ${3 * perSecond} requests/s for ${seconds} s per case`,
)
const unloaded = await runCase('none', perSecond / 2, quick ? 6 : 10, false)
const unloadedP99 = quantile(
  unloaded.results.filter((r) => r.status === 200).map((r) => r.ms),
  0.99,
)
log(`unloaded (half the capacity, no protection): p99 ${unloadedP99} ms`)
const runs = []
for (const name of cases) {
  const run = await runCase(name, 3 * perSecond, seconds)
  const half = (seconds * 1000) / 2
  run.phases = [phase(run, 5000, half, capacity), phase(run, half + 5000, seconds * 1000, capacity / 2)]
  run.phases[0].settledMs = settledAfter(run, 0, half)
  run.phases[1].settledMs = settledAfter(run, half, seconds * 1000)
  runs.push(run)
  log(
    `${name.padEnd(15)} ` +
      run.phases
        .map(
          (p, i) =>
            `[${i === 0 ? 'full' : 'half'}] p50 ${p.p50} p99 ${p.p99} ms, goodput ${(100 * p.goodput).toFixed(0)}%, refused ${p.refused} (shed in order ${(100 * p.sheddableShare).toFixed(1)}%), critical served ${(100 * p.criticalServed).toFixed(1)}%${p.settledMs === undefined ? '' : `, limit settled after ${(p.settledMs / 1000).toFixed(1)} s`}`,
        )
        .join('  ') +
      `  (load generator over ${BEHIND_MS} ms late: ${run.results.filter((r) => r.late > BEHIND_MS).length} requests)`,
  )
}

const fmt = (x) => (Number.isFinite(x) ? String(Math.round(x)) : '–')
const rows = runs.flatMap((r) =>
  r.phases.map(
    (p, i) =>
      `| ${r.name} | ${i === 0 ? `${capacity} at a time` : `${capacity / 2} at a time`} | ${fmt(p.p50)} | ${fmt(p.p99)} | ${Number.isFinite(p.p99) ? `${(p.p99 / unloadedP99).toFixed(1)}×` : '–'} | ${(100 * p.goodput).toFixed(0)}% | ${p.refused} | ${p.byClass.critical} / ${p.byClass.normal} / ${p.byClass.sheddable} | ${(100 * p.sheddableShare).toFixed(1)}% | ${(100 * p.criticalServed).toFixed(1)}% | ${p.settledMs === undefined ? '–' : `${(p.settledMs / 1000).toFixed(1)} s`} |`,
  ),
)
const md = `# Overload benchmark

\`npm run bench -- overload${quick ? ' --quick' : ''}\`: a service that serves ${capacity} requests at a time (15 to 25 ms each), offered ${3 * perSecond} requests a second (three times its capacity) for ${seconds} s, its capacity halved after ${seconds / 2} s; 20% critical, 50% normal, 30% sheddable requests. Figures from 5 s after each step to its end. Unloaded p99 (half the capacity, no protection): ${unloadedP99} ms. Goodput: answers within ${GOOD_MS} ms per second, against the capacity of the phase. Shed in order: the share of refusals that were not a critical or normal request refused in a 100 ms span in which a sheddable one was admitted. After the capacity halves, critical traffic alone (20% of the load) is 1.2× the capacity: not all of it can be served. Limit settled after: from the step, the end of the last second whose median limit was more than a quarter off the median of the phase's last 10 s.

| case | phase | admitted p50 ms | admitted p99 ms | p99 / unloaded | goodput | not served (503 or given up at 2 s) | not served: critical / normal / sheddable | shed in order | critical served | limit settled after |
|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|
${rows.join('\n')}

![Tollgate's limit and admitted latency over time](OVERLOAD.svg)
`
const tollgate = runs.find((r) => r.name === 'tollgate')
const svg = tollgate === undefined ? '' : chart(tollgate)
const base = values.out ? outBase(values.out) : quick ? outBase('overload') : undefined
if (base === undefined) {
  writeFileSync(join(BENCH_DIR, 'OVERLOAD.md'), md)
  if (svg) writeFileSync(join(BENCH_DIR, 'OVERLOAD.svg'), svg)
  log('wrote bench/OVERLOAD.md and bench/OVERLOAD.svg')
} else {
  writeFileSync(`${base}.md`, md)
  if (svg) writeFileSync(`${base}.svg`, svg)
  log(`wrote ${base}.md${svg ? ` and ${base}.svg` : ''}`)
}
await shutdown(0)

/** Tollgate's limit and requests in flight, and the admitted p99 per half second, over time. */
function chart(run) {
  const W = 720
  const H = 260
  const pad = 40
  const T = run.secs * 1000
  const x = (t) => pad + ((W - 2 * pad) * t) / T
  const bins = []
  for (let t = 0; t < T; t += 500) {
    const ok = run.results.filter((r) => r.due >= t && r.due < t + 500 && r.status === 200).map((r) => r.ms)
    bins.push([t + 250, quantile(ok, 0.99)])
  }
  const maxLimit = Math.max(capacity * 2, ...run.gate.map((g) => g.limit))
  const maxMs = Math.max(unloadedP99 * 3, ...bins.map(([, v]) => (Number.isFinite(v) ? Math.min(v, unloadedP99 * 6) : 0)))
  const yl = (v) => H - pad - ((H - 2 * pad) * v) / maxLimit
  const ym = (v) => H - pad - ((H - 2 * pad) * Math.min(v, maxMs)) / maxMs
  const line = (pts, color) =>
    `<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${pts.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(' ')}"/>`
  const limit = run.gate.filter((g) => g.t >= 0 && g.t <= T).map((g) => [x(g.t), yl(g.limit)])
  const inflight = run.gate.filter((g) => g.t >= 0 && g.t <= T).map((g) => [x(g.t), yl(g.inflight)])
  const p99 = bins.filter(([, v]) => Number.isFinite(v)).map(([t, v]) => [x(t), ym(v)])
  const cap = [
    [x(0), yl(capacity)],
    [x(T / 2), yl(capacity)],
    [x(T / 2), yl(capacity / 2)],
    [x(T), yl(capacity / 2)],
  ]
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">
<rect width="${W}" height="${H}" fill="white"/>
<text x="${pad}" y="16">Tollgate under 3× overload: limit (blue), in flight (grey), service capacity (dashed), admitted p99 (orange, right scale)</text>
<line x1="${pad}" y1="${H - pad}" x2="${W - pad}" y2="${H - pad}" stroke="#888"/>
<text x="${pad}" y="${H - pad + 14}">0 s</text><text x="${x(T / 2) - 8}" y="${H - pad + 14}">${run.secs / 2} s</text><text x="${W - pad - 16}" y="${H - pad + 14}">${run.secs} s</text>
<text x="4" y="${yl(maxLimit) + 4}">${maxLimit}</text><text x="4" y="${yl(0)}">0</text>
<text x="${W - pad + 4}" y="${ym(maxMs) + 4}">${Math.round(maxMs)} ms</text><text x="${W - pad + 4}" y="${ym(unloadedP99) + 4}">${unloadedP99} ms</text>
<polyline fill="none" stroke="#444" stroke-dasharray="4 3" points="${cap.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(' ')}"/>
${line(inflight, '#aaa')}
${line(limit, '#1f6feb')}
${line(p99, '#e36209')}
</svg>
`
}
