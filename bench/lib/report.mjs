// The Markdown report of an HTTP benchmark run.
import { basename } from 'node:path'
import { caseInfo, FRAMEWORKS, MODES, withTwins } from './cases.mjs'
import { chartFile } from './chart.mjs'

const int = (n) => (n == null ? '–' : Math.round(n).toLocaleString('en-US'))
const f = (n, d = 2) => (n == null || Number.isNaN(n) ? '–' : n.toFixed(d))
const signed = (n, d = 1) => (n == null ? '–' : `${n >= 0 ? '+' : '−'}${Math.abs(n).toFixed(d)}`)
const range = (s, fmt) => (s?.n > 1 ? ` (${fmt(s.min)}…${fmt(s.max)})` : '')
const esc = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ')

function checkCell(rec) {
  if (rec.status === 'skipped') return `skipped: ${esc(rec.reason)}`
  const notes = rec.notes?.length ? `; note: ${esc(rec.notes.join('; '))}` : ''
  if (rec.ok) return `ok${notes}`
  return `**FAIL**: ${esc(rec.checks.join('; '))}${notes}`
}

function summaryCell(rec) {
  if (!rec) return ''
  if (rec.status === 'skipped') return 'skipped'
  const s = rec.summary
  if (!s?.cycles) return rec.ok ? '–' : '**FAIL**'
  const cell =
    rec.id === 'bare'
      ? `${int(s.rps.median)} req/s · ${f(s.serverUsPerReq.median, 1)} µs/req`
      : `${f(s.ratioToBare.median)}× · ${signed(s.plusUsPerReq.median)} µs`
  return rec.ok ? cell : `**FAIL** ${cell}`
}

function detailRow(rec) {
  const label = rec.id === 'bare' ? `**${rec.label}**` : rec.label
  if (rec.status === 'skipped' || !rec.summary?.cycles) {
    return `| ${label} | – | – | – | – | – | – | – | – | – | – | – | – | ${checkCell(rec)} |`
  }
  const s = rec.summary
  const ratio = rec.id === 'bare' ? '1' : `${f(s.ratioToBare.median)}${range(s.ratioToBare, (x) => f(x))}`
  const plus =
    rec.id === 'bare'
      ? `(${f(s.serverUsPerReq.median, 1)} µs/req)`
      : `${signed(s.plusUsPerReq.median)}${range(s.plusUsPerReq, (x) => signed(x))}`
  const non2xx = s.non2xx === 0 ? '0' : `${int(s.non2xx)} (${f(s.non2xxShare * 100, s.non2xxShare > 0.99 ? 2 : 3)}%)`
  const redisCase = caseInfo(rec.id).redis
  const rc = redisCase ? f(s.redisCommandsPerReq.median) : '–'
  const rr = redisCase ? f(s.redisReadsPerReq.median, 3) : '–'
  const ru = redisCase ? f(s.redisUsPerReq.median, 1) : '–'
  const busy = s.serverCpuShare?.median == null ? '–' : `${Math.round(s.serverCpuShare.median * 100)}%`
  // Runs before these two were recorded have neither.
  const kernel = s.serverKernelUsPerReq?.n ? f(s.serverKernelUsPerReq.median, 1) : '–'
  const wakeups = s.loadCoreIpisPerReq?.n ? f(s.loadCoreIpisPerReq.median, 3) : '–'
  return `| ${label} | ${int(s.rps.median)} | ${ratio} | ${plus} | ${busy} | ${kernel} | ${wakeups} | ${f(s.p50Ms.median)} | ${f(s.p99Ms.median)} | ${non2xx} | ${rc} | ${rr} | ${ru} | ${checkCell(rec)} |`
}

/** The "Before → after" section of a run with --baseline (see compareWithBaseline in run.mjs). */
function beforeAfter(rows, meta) {
  const out = []
  const ratio = (s) => (s?.n ? `${f(s.median, 3)}${range(s, (x) => f(x, 3))}` : '–')
  out.push('## Before → after')
  out.push('')
  out.push(`Before (the \`@base\` rows): Tollgate from ${meta.baseline.text}. After: Tollgate from ${meta.current.text}.`)
  out.push('')
  out.push(
    'Tollgate/floor: in each cycle, Tollgate’s req/s ÷ the floor case’s req/s (same framework, mode and cycle); median (min…max) ' +
      'over cycles. Δ: after − before, of the medians. spread: the wider of the two min…max ranges. Δ µs/req: server CPU µs per ' +
      'request, after − before in the same cycle (median, min…max). A cell whose Tollgate/floor drops by more than the spread is **slower**.',
  )
  const slower = rows.filter((r) => r.verdict === 'slower')
  const missing = rows.filter((r) => r.delta == null)
  const na = missing.length ? `; ${missing.length} of ${rows.length} cell(s) could not be compared (n/a)` : ''
  out.push('')
  out.push(
    slower.length
      ? `> **Slower than before in ${slower.length} cell(s):** ${slower.map((r) => `${r.framework} / ${r.mode} / ${r.store}`).join(', ')}${na}`
      : `No cell dropped by more than its spread (${rows.length - missing.length} cell(s) compared${na}).`,
  )
  out.push('')
  out.push('| framework | mode | store | before: Tollgate/floor | after: Tollgate/floor | Δ | spread | Δ µs/req | verdict |')
  out.push('|---|---|---|--:|--:|--:|--:|--:|---|')
  for (const r of rows) {
    const delta = r.delta == null ? '–' : `${signed(r.delta, 3)} (${signed(r.deltaShare * 100, 1)}%)`
    const us = r.serverUsPerReqDelta?.n ? `${signed(r.serverUsPerReqDelta.median)}${range(r.serverUsPerReqDelta, (x) => signed(x))}` : '–'
    const verdict = r.verdict === 'slower' ? '**slower**' : r.verdict
    const checks = r.checks.length ? `; checks failed: ${r.checks.join(', ')}` : ''
    out.push(
      `| ${r.framework} | ${MODES[r.mode].label} | ${r.store} | ${ratio(r.before)} | ${ratio(r.after)} | ${delta} | ${r.spread == null ? '–' : f(r.spread, 3)} | ${us} | ${verdict}${checks} |`,
    )
  }
  out.push('')
  return out
}

/** What a reader needs before the tables: how the page came to be, how it was measured, how to read it. */
function howToRead(cfg) {
  const page = !cfg.quick && cfg.out === 'RESULTS'
  return [
    page
      ? 'This page is written by `npm run bench` (a full run), with its JSON and one chart per framework beside it; ' +
        '`npm run bench:charts` renders it again from the JSON. It is never edited by hand.'
      : 'Written by `npm run bench`; see bench/README.md for the options.',
    '',
    '**How it is measured.** Every case is a server of its own, pinned to one core; wrk (one thread) and redis-server ' +
      'run on the other. All servers of one framework and mode are up at once, and wrk visits them in short slices, ' +
      'cycle after cycle, forward then reverse. The machine’s speed drifts from one second to the next, so each case is ' +
      'compared with the bare server of its framework **in the same cycle**, seconds apart, and only those ratios are read: ' +
      'absolute req/s compare only within one run. Each run checks what it measures (no non-2xx below the limit, ≥ 99% 429s ' +
      'in a flood, the client IP taken from X-Forwarded-For with many clients and Redis keyed by it, no Redis command ' +
      'from a memory case) and fails a case that does not pass.',
    '',
    '**How to read it.** `×` is a case’s throughput over bare’s in the same cycle, and `+µs` the server CPU time each ' +
      'request adds over bare’s: medians over cycles, with (min…max) in the details. `+µs` is the steadier of the two and ' +
      'the one to quote for cost; `×` is what a saturated server would lose. Trust a difference between two cases of one ' +
      'framework and mode when their ranges do not overlap. The *floor* writes the same header fields and 429 with no ' +
      'limiter logic and *minimal* adds a hand-written per-client count, so what lies between them and Tollgate is what ' +
      'Tollgate’s own logic costs. To tell how far apart two servers of one build read on the machine at hand, run an ' +
      'A/A check (`--baseline` with this checkout); a difference inside that needs more cycles (`--runs`, `--cycles`) or ' +
      'the steadier instruments (`npm run bench -- instructions`, `profile`, `corun`). Every column is explained under ' +
      'Details and in bench/README.md, “Reading the table”.',
    '',
  ]
}

export function renderMarkdown({ meta, config: cfg, groups, beforeAfter: comparison }) {
  const out = []
  const idsOf = (fw) => (cfg.baseline ? withTwins(FRAMEWORKS[fw]) : FRAMEWORKS[fw])
  const all = groups.flatMap((g) => Object.values(g.cases).map((c) => ({ g, c })))
  const failed = all.filter(({ c }) => c.status !== 'skipped' && !c.ok)
  const skipped = all.filter(({ c }) => c.status === 'skipped')
  const passed = all.filter(({ c }) => c.ok)

  out.push('# Tollgate HTTP benchmark')
  out.push('')
  out.push(
    `${meta.date} · Node ${meta.node} · ${meta.cpu}, ${meta.cores} cores (${meta.pinned}) · ` +
      `${(cfg.runs ?? 1) > 1 ? `${cfg.runs} pooled runs × ` : ''}${cfg.cycles} cycles × ${cfg.slice} s slices, wrk -t1 -c${cfg.connections} · ` +
      `${int(cfg.clients)} client IPs in "many" mode · run took ${f(meta.seconds / 60, 1)} min`,
  )
  out.push('')
  out.push(
    `Versions: ${Object.entries(meta.versions)
      .filter(([, v]) => v)
      .map(([p, v]) => `${p} ${v}`)
      .join(', ')}; redis-server ${meta.redisServer}; wrk ${meta.wrk}. ` +
      `Tollgate: ${Object.entries(meta.tollgate)
        .map(([fw, v]) => `${fw} ${v}`)
        .join('; ')}.`,
  )
  out.push('')
  out.push(...howToRead(cfg))
  if (meta.baseline) {
    out.push(`Before/after run: the \`@base\` cases run Tollgate from ${meta.baseline.text}; the others from ${meta.current.text}.`)
    out.push('')
  }
  if (cfg.quick) out.push('> **Quick run** (`--quick`): short slices and two cycles, for checking the rig. Do not quote these numbers.\n')
  if (failed.length) {
    out.push(`> **CHECKS FAILED for ${failed.length} case(s):**`)
    for (const { g, c } of failed) out.push(`> - ${g.framework} / ${g.mode} / ${c.id}: ${esc(c.checks.join('; '))}`)
  } else {
    out.push(`**Checks: all ${passed.length} measured cases passed** (overhead modes: no non-2xx; flood: ≥ 99% 429s; see below).`)
  }
  if (skipped.length) {
    const reasons = [...new Set(skipped.map(({ c }) => c.reason))]
    out.push('')
    out.push(`Skipped ${skipped.length} case(s): ${reasons.map(esc).join('; ')}`)
  }
  out.push('')

  // Summary: one table per framework, modes as columns.
  const modes = cfg.modes
  out.push('## Summary')
  out.push('')
  out.push(
    'Median over cycles of throughput relative to the bare server of the same framework measured in the same cycle (×), ' +
      'and the server CPU time each request adds over bare (µs). Bare rows give absolute req/s and CPU µs per request.',
  )
  for (const fw of cfg.frameworks) {
    const gs = modes.map((m) => groups.find((g) => g.framework === fw && g.mode === m))
    if (!gs.some(Boolean)) continue
    out.push('')
    out.push(`### ${fw}`)
    out.push('')
    out.push(`| case | ${modes.map((m) => MODES[m].label).join(' | ')} |`)
    out.push(`|---|${modes.map(() => '---').join('|')}|`)
    for (const id of idsOf(fw)) {
      const recs = gs.map((g) => g?.cases[id])
      if (!recs.some(Boolean)) continue
      const label = recs.find(Boolean).label
      out.push(`| ${id === 'bare' ? `**${label}**` : label} | ${recs.map(summaryCell).join(' | ')} |`)
    }
    // The SVG run.mjs writes beside this file (lib/chart.mjs).
    if (cfg.out) {
      out.push('')
      out.push(`![${fw}: throughput relative to bare, per mode](${chartFile(basename(cfg.out), fw)})`)
    }
  }
  out.push('')

  if (comparison) out.push(...beforeAfter(comparison, meta))

  // Details.
  out.push('## Details')
  out.push('')
  out.push(
    'req/s: median of the slices. × bare: median of per-cycle ratios (min…max over cycles). ' +
      '+µs/req: server CPU µs per request minus bare’s in the same cycle (min…max). server busy: the server’s CPU time over the slice’s wall time (median; well under 100% means it waited: on Redis, or on the load generator). kernel µs/req: the part of the server’s CPU time spent in the kernel (median). wake-ups/req: inter-processor interrupts received by wrk’s core per request (median), nearly all of them the server waking wrk to read an answer; on a VM each is a trap to the hypervisor, and fewer mean answers written in bursts (see bench/README.md, “The wake-up regime”). p50/p99: medians of the slices’ wrk latency percentiles, ms. ' +
      'non-2xx: over all measured slices. Redis cmd/req: commands Redis executed per request (INFO commandstats; ' +
      'MULTI, EXEC and commands run inside scripts each count). Redis reads/req: socket reads by Redis per request ' +
      '(≈ round trips; a pipeline read in one go counts once). Redis µs/req: redis-server CPU per request.',
  )
  for (const g of groups) {
    const m = MODES[g.mode]
    out.push('')
    out.push(`### ${g.framework} — ${m.label}`)
    out.push('')
    out.push(`${m.what.replace('distinct client IPs', `${int(cfg.clients)} distinct client IPs`)}.`)
    out.push('')
    out.push(
      '| case | req/s | × bare | +µs/req | server busy | kernel µs/req | wake-ups/req | p50 ms | p99 ms | non-2xx | Redis cmd/req | Redis reads/req | Redis µs/req | check |',
    )
    out.push('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|')
    for (const id of idsOf(g.framework)) if (g.cases[id]) out.push(detailRow(g.cases[id]))
    const bareBusy = g.cases.bare?.summary?.serverCpuShare?.median
    if (bareBusy != null && bareBusy < 0.85) {
      out.push('')
      out.push(
        `Note: the bare server was busy only ${Math.round(bareBusy * 100)}% of the time (median): the load generator, not the ` +
          'server, set the pace, so × bare understates what the limiters cost here; +µs/req does not depend on it.',
      )
    }
  }

  // Anything the servers printed (validation warnings of a peer, errors).
  const noisy = all.filter(({ c }) => c.serverStderr)
  if (noisy.length) {
    out.push('')
    out.push('## Server output')
    out.push('')
    const seen = new Set()
    for (const { g, c } of noisy) {
      const text = c.serverStderr.slice(0, 600)
      const key = `${g.framework}/${c.id}:${text.slice(0, 120)}`
      if (seen.has(key)) continue
      seen.add(key)
      out.push(`- ${g.framework} / ${c.id} (${g.mode}): \`${esc(text.replace(/`/g, "'"))}\``)
    }
  }
  out.push('')
  return out.join('\n')
}
