// SVG charts of an HTTP benchmark run: one per framework, one panel per mode, one bar per
// case: its throughput relative to the bare server of the same framework in the same cycle (median over
// cycles, the whisker spanning min…max). Plain SVG text, no dependency, so the bench can write it beside
// its Markdown and GitHub can show it in a README.
import { baseOf, CASES, caseInfo, FRAMEWORKS, MODES, withTwins } from './cases.mjs'

// Labels short enough for the left column; the Markdown report has the long ones.
const SHORT = {
  bare: 'bare (no limiter)',
  floor: 'floor (headers + 429 only)',
  minimal: 'minimal (floor + per-client count)',
  'minimal-redis': 'minimal, Redis (count in Redis)',
  'tollgate-memory': 'Tollgate, memory',
  'tollgate-memory-no-headers': 'Tollgate, memory, headers: false',
  'tollgate-redis': 'Tollgate, Redis',
  'erl-memory': 'express-rate-limit, memory',
  'erl-redis': 'express-rate-limit, Redis',
  'rlf-memory': 'rate-limiter-flexible, memory',
  'rlf-redis': 'rate-limiter-flexible, Redis',
  'frl-memory': '@fastify/rate-limit, memory',
  'frl-redis': '@fastify/rate-limit, Redis',
  'krl-memory': 'koa-ratelimit, memory',
  'krl-redis': 'koa-ratelimit, Redis',
}

const COLOR = {
  bare: '#9ca3af',
  floor: '#cbd5e1',
  minimal: '#94a3b8',
  tollgate: '#0f766e',
  tollgateRedis: '#115e59',
  tollgateBase: '#5eead4',
  peer: '#f59e0b',
  peerRedis: '#d97706',
}

const TITLE = { express: 'Express', fastify: 'Fastify', koa: 'Koa' }

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
const num = (n) => Math.round(n * 10) / 10

function colorOf(id) {
  const info = caseInfo(id) ?? {}
  if (id === 'bare') return COLOR.bare
  if (id === 'floor') return COLOR.floor
  if (id === 'minimal' || id === 'minimal-redis') return COLOR.minimal
  if (info.tollgate) return info.baseline ? COLOR.tollgateBase : info.redis ? COLOR.tollgateRedis : COLOR.tollgate
  return info.redis ? COLOR.peerRedis : COLOR.peer
}

function labelOf(id) {
  const of = baseOf(id)
  const label = SHORT[of] ?? CASES[of]?.label ?? id
  return of === id ? label : `${label}, before`
}

/**
 * The SVG of one framework's results, or null when the run has no measured case for it.
 * @param {object} report the bench report ({ meta, config, groups }), as run.mjs writes it to JSON
 */
export function renderChart(report, framework) {
  const cfg = report.config
  const modes = cfg.modes.filter((m) => report.groups.some((g) => g.framework === framework && g.mode === m))
  if (!modes.length) return null
  const ids = (cfg.baseline ? withTwins(FRAMEWORKS[framework]) : FRAMEWORKS[framework]).filter((id) =>
    modes.some((m) => report.groups.find((g) => g.framework === framework && g.mode === m)?.cases[id]),
  )
  const stat = (mode, id) => {
    const rec = report.groups.find((g) => g.framework === framework && g.mode === mode)?.cases[id]
    const r = rec?.summary?.ratioToBare
    return rec && rec.status !== 'skipped' && r?.n ? { ...r, ok: rec.ok } : { skipped: rec?.status === 'skipped', missing: !rec }
  }
  let top = 1
  for (const m of modes) for (const id of ids) top = Math.max(top, stat(m, id).max ?? 0)
  const scaleMax = Math.ceil((top * 1.04) / 0.25) * 0.25

  // Geometry.
  const W = 760
  const labelW = 210
  const plotX = labelW + 10
  const plotW = W - plotX - 70
  const barH = 14
  const rowH = 20
  const panelHead = 24
  const x = (v) => plotX + (Math.min(v, scaleMax) / scaleMax) * plotW
  const headH = 62
  const panelH = panelHead + ids.length * rowH + 14
  const axisH = 26
  const legendH = 30
  const H = headH + modes.length * panelH + axisH + legendH

  const out = []
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif" font-size="12" role="img" aria-labelledby="title desc">`,
  )
  const title = `${TITLE[framework] ?? framework}: throughput relative to bare ${TITLE[framework] ?? framework}`
  const m = report.meta ?? {}
  const sub = `higher is better · median of ${(cfg.runs ?? 1) * cfg.cycles} interleaved cycles${(cfg.runs ?? 1) > 1 ? ` (${cfg.runs} pooled runs)` : ''}, whiskers min…max · ${m.cpu ?? '?'}, ${m.cores ?? '?'} cores · Node ${m.node ?? '?'} · ${String(m.date ?? '').slice(0, 10)}`
  out.push(`<title id="title">${esc(title)}</title>`)
  out.push(
    `<desc id="desc">${esc(`${sub}. Higher is better; 1× is the bare server. ${modes.map((mode) => `${MODES[mode].label}: ${ids.map((id) => `${labelOf(id)} ${stat(mode, id).median?.toFixed(2) ?? 'n/a'}×`).join(', ')}`).join('. ')}.`)}</desc>`,
  )
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`)
  out.push(`<text x="16" y="26" font-size="16" font-weight="600" fill="#111827">${esc(title)}</text>`)
  out.push(`<text x="16" y="46" fill="#4b5563">${esc(sub)}</text>`)

  // Grid lines and axis ticks, shared by every panel.
  const gridTop = headH
  const gridBottom = headH + modes.length * panelH
  for (let t = 0; t <= scaleMax + 1e-9; t += 0.25) {
    const gx = num(x(t))
    const strong = Math.abs(t - 1) < 1e-9
    out.push(
      `<line x1="${gx}" y1="${gridTop}" x2="${gx}" y2="${gridBottom}" stroke="${strong ? '#374151' : '#e5e7eb'}" stroke-width="${strong ? 1.5 : 1}"${strong ? ' stroke-dasharray="4 3"' : ''}/>`,
    )
    out.push(`<text x="${gx}" y="${gridBottom + 16}" text-anchor="middle" fill="#4b5563">${Number(t.toFixed(2))}×</text>`)
  }

  modes.forEach((mode, i) => {
    const y0 = headH + i * panelH
    out.push(`<text x="16" y="${y0 + 16}" font-size="13" font-weight="600" fill="#111827">${esc(MODES[mode].label)}</text>`)
    ids.forEach((id, j) => {
      const s = stat(mode, id)
      const cy = y0 + panelHead + j * rowH
      const bold = caseInfo(id)?.tollgate && !caseInfo(id)?.baseline
      out.push(
        `<text x="${labelW}" y="${cy + barH - 3}" text-anchor="end" fill="#111827"${bold ? ' font-weight="600"' : ''}>${esc(labelOf(id))}</text>`,
      )
      if (s.median == null) {
        out.push(
          `<text x="${plotX + 4}" y="${cy + barH - 3}" fill="#6b7280" font-style="italic">${s.skipped ? 'skipped' : 'not run'}</text>`,
        )
        return
      }
      out.push(`<rect x="${plotX}" y="${cy}" width="${num(x(s.median) - plotX)}" height="${barH}" fill="${colorOf(id)}" rx="2"/>`)
      if (s.n > 1) {
        const wy = cy + barH / 2
        out.push(`<line x1="${num(x(s.min))}" y1="${wy}" x2="${num(x(s.max))}" y2="${wy}" stroke="#111827" stroke-width="1"/>`)
        for (const v of [s.min, s.max])
          out.push(`<line x1="${num(x(v))}" y1="${wy - 4}" x2="${num(x(v))}" y2="${wy + 4}" stroke="#111827" stroke-width="1"/>`)
      }
      const labelX = num(Math.max(x(s.median), s.n > 1 ? x(s.max) : 0) + 6)
      const failed = s.ok === false ? ' (checks failed)' : ''
      out.push(`<text x="${labelX}" y="${cy + barH - 3}" fill="#111827">${s.median.toFixed(2)}×${failed}</text>`)
    })
  })

  // Legend.
  const ly = gridBottom + axisH + 12
  const legend = [
    [COLOR.bare, 'bare (dashed line: 1×)'],
    [COLOR.floor, 'floor'],
    [COLOR.minimal, 'minimal'],
    [COLOR.tollgate, 'Tollgate memory'],
    [COLOR.tollgateRedis, 'Tollgate Redis'],
    ...(cfg.baseline ? [[COLOR.tollgateBase, 'Tollgate before']] : []),
    [COLOR.peer, 'peer memory'],
    [COLOR.peerRedis, 'peer Redis'],
  ]
  const used = new Set(ids.map(colorOf))
  let lx = 16
  for (const [color, text] of legend.filter(([color]) => used.has(color))) {
    out.push(`<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${color}" rx="2"/>`)
    out.push(`<text x="${lx + 17}" y="${ly}" fill="#374151">${esc(text)}</text>`)
    lx += 17 + text.length * 7 + 14
  }
  out.push('</svg>')
  return `${out.join('\n')}\n`
}

/** The chart file name of a framework for a report written as `<out>.md`: `<out>-<framework>.svg`. */
export const chartFile = (out, framework) => `${out}-${framework}.svg`

/** Every framework's chart of a report: [{ framework, file, svg }], file named after `out`. */
export function renderCharts(report, out = report.config.out) {
  return report.config.frameworks
    .map((framework) => ({ framework, file: chartFile(out, framework), svg: renderChart(report, framework) }))
    .filter((c) => c.svg)
}
