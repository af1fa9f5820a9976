// Prints the headline table of the docs' Performance page (scripts/docs-performance.mjs) from a bench JSON: every framework x mode x store cell.
//
//   node bench/headline.mjs [bench/RESULTS.json]
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

if (['-h', '--help'].includes(process.argv[2])) {
  console.log(
    "usage: node bench/headline.mjs [FILE.json]   the docs' headline table (floor, Tollgate, best peer...) from a run's JSON (default bench/RESULTS.json)",
  )
  process.exit(0)
}
const d = JSON.parse(readFileSync(process.argv[2] ?? join(import.meta.dirname, 'RESULTS.json'), 'utf8'))
const PEERS = {
  express: { memory: ['erl-memory', 'rlf-memory'], redis: ['erl-redis', 'rlf-redis'] },
  fastify: { memory: ['frl-memory'], redis: ['frl-redis'] },
  koa: { memory: ['krl-memory'], redis: ['krl-redis'] },
}
const NAMES = { erl: 'express-rate-limit', rlf: 'rate-limiter-flexible', frl: '@fastify/rate-limit', krl: 'koa-ratelimit' }
const MODES = { one: 'one client', many: '10k clients', flood: 'flood' }
const f = (r) => `${r.median.toFixed(2)} (${r.min.toFixed(2)}…${r.max.toFixed(2)})`
// Cycle ids are unique across the runs of a pooled run: run r holds cycles r·cycles … (r+1)·cycles − 1.
const CYCLES = d.config?.cycles ?? 5
const RUNS = d.config?.runs ?? 1
/** a's req/s over b's in each cycle both ran (of run `run` only, when given), sorted. */
const ratios = (a, b, run) => {
  const byCycle = new Map()
  for (const s of a.slices) byCycle.set(s.cycle, s.rps)
  const xs = []
  for (const s of b.slices) {
    if (run !== undefined && Math.floor(s.cycle / CYCLES) !== run) continue
    if (byCycle.has(s.cycle)) xs.push(byCycle.get(s.cycle) / s.rps)
  }
  return xs.sort((p, q) => p - q)
}
const median = (xs) => xs[Math.floor(xs.length / 2)]
const perCycle = (a, b, run) => median(ratios(a, b, run))
/** Tollgate against the peer in the same cycles: the median ratio, and in how many cycles Tollgate was ahead. */
const versus = (tg, peer) => {
  const xs = ratios(tg, peer)
  return `${median(xs).toFixed(2)}, ${xs.filter((x) => x > 1).length} of ${xs.length}`
}
/** Tollgate ÷ floor in each run of a pooled run: how far one run's figure moves from the next. */
const byRun = (tg, floor) =>
  RUNS > 1 ? ` | ${Array.from({ length: RUNS }, (_, r) => perCycle(tg, floor, r)?.toFixed(2) ?? '–').join(' / ')}` : ''
const withMinimal = d.groups.some((g) => g.cases.minimal?.slices?.length || g.cases['minimal-redis']?.slices?.length)
const rows = []
for (const fw of ['express', 'fastify', 'koa'])
  for (const mode of ['one', 'many', 'flood'])
    for (const store of ['memory', 'redis']) {
      const g = d.groups.find((x) => x.framework === fw && x.mode === mode)
      if (!g) continue // a focused run: only its cells
      const floor = g.cases.floor,
        tg = g.cases[`tollgate-${store}`]
      let best
      for (const id of PEERS[fw][store]) {
        const c = g.cases[id]
        if (!c?.summary?.ratioToBare) continue
        if (!best || c.summary.ratioToBare.median > best.c.summary.ratioToBare.median) best = { id, c }
      }
      if (!tg?.summary?.ratioToBare || !floor?.summary || !best) continue // a focused run without this cell's cases
      const diff = tg.summary.ratioToBare.median - best.c.summary.ratioToBare.median
      // The minimal limiter of the cell's store when the run has it (memory: a hand-written per-client
      // count; Redis: the same count in Redis, a hand-written batched MULTI/INCRBY/PEXPIRE/EXEC on a raw
      // socket): minimal ÷ floor is what counting per client in that store costs at the least, Tollgate ÷
      // minimal what Tollgate costs beyond that.
      const m = g.cases[store === 'memory' ? 'minimal' : 'minimal-redis']
      const minimal = m?.slices?.length ? m : undefined
      const extra = withMinimal
        ? minimal
          ? ` | ${perCycle(minimal, floor).toFixed(2)} | ${perCycle(tg, minimal).toFixed(2)}`
          : ' | – | –'
        : ''
      rows.push(
        `| ${fw} | ${MODES[mode]} | ${store} | ${f(floor.summary.ratioToBare)} | **${f(tg.summary.ratioToBare)}** | ${NAMES[best.id.split('-')[0]]} ${f(best.c.summary.ratioToBare)} | ${diff >= 0 ? '+' : '−'}${Math.abs(diff).toFixed(2)} | ${versus(tg, best.c)} | ${perCycle(tg, floor).toFixed(2)}${byRun(tg, floor)}${extra} |`,
      )
    }
const runsHead = RUNS > 1 ? ` | Tollgate ÷ floor, run ${Array.from({ length: RUNS }, (_, r) => r + 1).join(' / ')}` : ''
console.log(
  `| framework | mode | store | floor | Tollgate | best peer of the cell | Tollgate − peer | Tollgate ÷ peer per cycle, cycles ahead | Tollgate ÷ floor${runsHead}${withMinimal ? ' | minimal ÷ floor | Tollgate ÷ minimal' : ''} |`,
)
console.log(`|---|---|---|--:|--:|--:|--:|--:|--:|${RUNS > 1 ? '--:|' : ''}${withMinimal ? '--:|--:|' : ''}`)
console.log(rows.join('\n'))

// Runs that recorded them (bench/README.md, "The wake-up regime"): per framework × mode, the wake-ups of
// wrk's core and the server's kernel µs per request, medians of the cells' slices, for the floor, the
// minimal limiters and Tollgate on each store, so a ratio can be read against the regime it ran in.
const WAKE = ['floor', 'minimal', 'tollgate-memory', 'minimal-redis', 'tollgate-redis']
const recorded = (c) => c?.summary?.loadCoreIpisPerReq?.n > 0
if (d.groups.some((g) => WAKE.some((id) => recorded(g.cases[id])))) {
  const shown = WAKE.filter((id) => d.groups.some((g) => recorded(g.cases[id])))
  console.log('')
  console.log(`| framework | mode | ${shown.map((id) => `${id}: wake-ups / kernel µs per request`).join(' | ')} |`)
  console.log(`|---|---|${shown.map(() => '--:').join('|')}|`)
  for (const fw of ['express', 'fastify', 'koa'])
    for (const mode of ['one', 'many', 'flood']) {
      const g = d.groups.find((x) => x.framework === fw && x.mode === mode)
      if (!g) continue
      const cell = (id) => {
        const s = g.cases[id]?.summary
        return recorded(g.cases[id]) ? `${s.loadCoreIpisPerReq.median.toFixed(2)} / ${s.serverKernelUsPerReq.median.toFixed(1)}` : '–'
      }
      console.log(`| ${fw} | ${MODES[mode]} | ${shown.map(cell).join(' | ')} |`)
    }
}
