#!/usr/bin/env node
// Two cases measured at the same moment, on the same core: a paired comparison that the machine's
// speed drift cannot tilt. Both servers (the HTTP bench's, servers/<framework>.mjs) are pinned to
// core 0 and loaded together, each by its own wrk (-t1 -c50, core 1), for --seconds per round. The
// kernel shares core 0 between the two busy servers, so each round's ratio of their req/s is the
// inverse ratio of their CPU time per request, taken over the same seconds, whatever the core's speed
// did meanwhile. run.mjs compares cases slice after slice instead, and on a machine whose speed drifts
// by up to 2x within seconds a gap of 2% needs dozens of its cycles to show.
//
//   node bench/corun.mjs --cases A,B [--framework express] [--mode one|many|flood] [--rounds 12]
//                        [--seconds 4] [--warm 3] [--baseline DIR] [--out NAME]
//
// A and B may be the same case: that is the A/A check, whose ratios should spread around 1.000. A
// case id ending in @base runs with Tollgate imported from --baseline DIR (a built tree), as in
// run.mjs, so `--cases tollgate-memory,tollgate-memory@base --baseline ../old` compares two trees.
// Rounds alternate which wrk starts first, and the second half of the rounds runs on new servers
// with the two cases' places swapped (see `half`). Redis cases get a redis-server of their own on core 1.
//
// What it measures is not what run.mjs measures: two servers on one core evict each other's caches
// at every switch, so a case whose time goes to memory more than to instructions pays more here than
// alone. Use it to decide a small difference between two cases, or what a change is worth; the
// headline figures stay run.mjs's.
import { writeFileSync } from 'node:fs'
import { relative, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { baseOf, CASES, caseInfo, MODES } from './lib/cases.mjs'
import { outBase, outHelp } from './lib/out.mjs'
import {
  deadline,
  freePort,
  installSignalHandlers,
  pinned,
  spawnTracked,
  startRedis,
  stopAll,
  stopChild,
  waitForLine,
  which,
} from './lib/procs.mjs'
import { median } from './lib/stats.mjs'
import { runWrk } from './lib/wrk.mjs'

const { values } = parseArgs({
  options: {
    framework: { type: 'string', default: 'express' },
    cases: { type: 'string', default: '' },
    mode: { type: 'string', default: 'one' },
    rounds: { type: 'string', default: '12' },
    seconds: { type: 'string', default: '4' },
    warm: { type: 'string', default: '3' },
    baseline: { type: 'string', default: '' },
    out: { type: 'string', default: '' },
    'max-minutes': { type: 'string', default: '20' },
    help: { type: 'boolean', short: 'h' },
  },
})
const USAGE =
  'usage: node bench/corun.mjs --cases A,B [--framework express] [--mode one|many|flood] [--rounds 12] [--seconds 4] [--warm 3] [--baseline DIR] [--out NAME]'
if (values.help) {
  console.log(`${USAGE}\n  ${outHelp('unset: the result is only printed')}`)
  process.exit(0)
}
const fail = (message) => {
  console.error(`corun.mjs: ${message}\n${USAGE}`)
  process.exit(2)
}
for (const tool of ['wrk', 'taskset']) if (!which(tool)) fail(`needs ${tool} on the PATH (apt-get install wrk util-linux)`)
const FRAMEWORK = values.framework
const PAIR = values.cases.split(',').filter(Boolean)
if (PAIR.length !== 2) fail(`--cases takes exactly two case ids, got "${values.cases}"`)
for (const id of PAIR) if (CASES[baseOf(id)] === undefined) fail(`unknown case ${id}; node bench/run.mjs --list names them`)
if (PAIR.some((id) => caseInfo(id).baseline) && !values.baseline) fail('a case ending in @base needs --baseline DIR')
const MODE = MODES[values.mode]
if (MODE === undefined) fail(`--mode: one, many or flood, not ${values.mode}`)
const whole = (name, min) => {
  const n = Number(values[name])
  if (!Number.isSafeInteger(n) || n < min) fail(`--${name}: a whole number ≥ ${min}, not ${values[name]}`)
  return n
}
const ROUNDS = whole('rounds', 1)
const SECONDS = whole('seconds', 1)
const WARM = whole('warm', 0)
const BASELINE = values.baseline ? resolve(values.baseline) : ''

installSignalHandlers()
deadline(Number(values['max-minutes']), 'corun.mjs')
const redisServer = PAIR.some((id) => caseInfo(id).redis) ? await startRedis(1) : undefined

/** One case's server, pinned to core 0, up and ready: { id, port, child }. `slot` names its Redis keys. */
async function start(id, slot) {
  const port = await freePort()
  const info = caseInfo(id)
  const args = [
    resolve(import.meta.dirname, 'servers', `${FRAMEWORK}.mjs`),
    '--case',
    baseOf(id),
    '--port',
    String(port),
    '--max',
    String(MODE.max),
    '--window-ms',
    String(MODE.windowMs),
    '--prefix',
    `corun:${process.pid}:${slot}:`, // each server start its own keys
  ]
  if (info.redis) args.push('--redis', redisServer.url)
  if (info.baseline) args.push('--tollgate-from', BASELINE)
  const [cmd, argv] = pinned(0, process.execPath, args)
  const child = spawnTracked(`${FRAMEWORK}/${id}`, cmd, argv, {
    cwd: import.meta.dirname,
    env: { ...process.env, NODE_ENV: 'production' },
  })
  const line = await waitForLine(child, /^(READY|SKIP)\b ?(.*)$/, 30_000, `${FRAMEWORK}/${id}`)
  if (line[1] === 'SKIP') {
    await stopChild(child)
    fail(`${id} skipped: ${line[2]}`)
  }
  // Drained, so that a server that logs never blocks on a full pipe.
  child.stdout.resume()
  child.stderr.resume()
  return { id, port, child }
}

const load = (server, seconds) => runWrk({ port: server.port, seconds, connections: 50, script: MODE.script, core: 1 })

/** Two-sided sign test: the chance of a split at least this uneven between two equal cases. */
function signTest(ahead, n) {
  const k = Math.min(ahead, n - ahead)
  let tail = 0
  let c = 1 // C(n, 0)
  for (let i = 0; i <= k; i++) {
    tail += c
    c = (c * (n - i)) / (i + 1)
  }
  return Math.min(1, (2 * tail) / 2 ** n)
}

const started = new Date()
console.log(`${FRAMEWORK}, ${MODE.label}: ${PAIR[0]} (A) and ${PAIR[1]} (B) on core 0, ${ROUNDS} rounds of ${SECONDS} s`)

/**
 * Rounds `from` to `to` (1-based, exclusive end) with each case in a given place: the first server
 * started, on the first port. The place itself tilts the split by about 1% (an A/A run of 16 rounds
 * read 0.989, 3 ahead), so the second half of the rounds swaps the places, on new servers, and the
 * tilt cancels in the mean of the two halves' geometric means (the estimate printed).
 */
async function half(from, to, swapped) {
  const ids = swapped ? [PAIR[1], PAIR[0]] : PAIR
  const placed = [await start(ids[0], `${from}a`), await start(ids[1], `${from}b`)]
  const [serverA, serverB] = swapped ? [placed[1], placed[0]] : placed
  if (WARM > 0) for (const s of placed) await load(s, WARM)
  const out = []
  for (let r = from; r < to; r++) {
    // Alternate which wrk starts first, so that neither server always gets the head start.
    const first = r % 2 === 0 ? [serverA, serverB] : [serverB, serverA]
    const got = await Promise.all(first.map((s) => load(s, SECONDS)))
    const [a, b] = r % 2 === 0 ? got : [got[1], got[0]]
    for (const [s, w] of [
      [serverA, a],
      [serverB, b],
    ]) {
      // In a flood nearly every answer is a 429; elsewhere any is a fault of the run.
      if (w.socket_errors > 0 || (values.mode !== 'flood' && w.non2xx > 0))
        fail(`${s.id}: ${w.non2xx} non-2xx responses and ${w.socket_errors} socket errors in round ${r}`)
    }
    const round = { round: r, placesSwapped: swapped, rpsA: a.rps, rpsB: b.rps, ratio: a.rps / b.rps }
    out.push(round)
    console.log(
      `round ${r}${swapped ? ' (places swapped)' : ''}: A ${Math.round(a.rps)}/s, B ${Math.round(b.rps)}/s, A ÷ B ${round.ratio.toFixed(4)}`,
    )
  }
  for (const s of placed) await stopChild(s.child)
  return out
}

const split = 1 + Math.ceil(ROUNDS / 2)
const rounds = [...(await half(1, split, false)), ...(await half(split, ROUNDS + 1, true))]
await redisServer?.stop()

const geomean = (xs) => Math.exp(xs.reduce((sum, x) => sum + Math.log(x), 0) / xs.length)
const ratios = rounds.map((r) => r.ratio)
const kept = geomean(rounds.filter((r) => !r.placesSwapped).map((r) => r.ratio))
const swapped = rounds.some((r) => r.placesSwapped) ? geomean(rounds.filter((r) => r.placesSwapped).map((r) => r.ratio)) : kept
const ahead = ratios.filter((x) => x > 1).length
const summary = {
  // The estimate: the mean of the two halves' geometric means, in which the places' tilt cancels.
  estimate: Math.sqrt(kept * swapped),
  median: median(ratios),
  min: Math.min(...ratios),
  max: Math.max(...ratios),
  ahead,
  rounds: ratios.length,
  p: signTest(ahead, ratios.length),
  // What the first place is worth: > 1 when the server started first, on the first port, gets more.
  tilt: Math.sqrt(kept / swapped),
}
const minutes = ((Date.now() - started.getTime()) / 60_000).toFixed(1)
const verdict = `A ÷ B: ${summary.estimate.toFixed(4)} (median ${summary.median.toFixed(4)}, range ${summary.min.toFixed(4)}–${summary.max.toFixed(4)}); A ahead in ${ahead} of ${ratios.length} rounds (sign test p ≈ ${summary.p.toFixed(3)}); the first place's tilt ${summary.tilt.toFixed(4)}; ${minutes} min`
console.log(verdict)

if (values.out) {
  const base = outBase(values.out)
  const meta = {
    date: started.toISOString(),
    node: process.version,
    framework: FRAMEWORK,
    mode: values.mode,
    seconds: SECONDS,
    warm: WARM,
    baseline: BASELINE || undefined,
  }
  writeFileSync(`${base}.json`, `${JSON.stringify({ meta, cases: PAIR, rounds, summary }, null, 2)}\n`)
  const md = [
    `# ${PAIR[0]} (A) against ${PAIR[1]} (B), at the same time on one core: ${FRAMEWORK}, ${MODE.label}`,
    '',
    `\`node bench/corun.mjs --framework ${FRAMEWORK} --mode ${values.mode} --cases ${PAIR.join(',')} --rounds ${ROUNDS} --seconds ${SECONDS} --warm ${WARM}${BASELINE ? ` --baseline ${values.baseline}` : ''}\`, node ${process.version}, ${meta.date.slice(0, 16)}Z. Both servers pinned to core 0, each loaded by its own wrk (-t1 -c50, core 1) in the same ${SECONDS} s; see the header of bench/corun.mjs.`,
    '',
    verdict,
    '',
    '| round | places | A req/s | B req/s | A ÷ B |',
    '|--:|---|--:|--:|--:|',
    ...rounds.map(
      (r) =>
        `| ${r.round} | ${r.placesSwapped ? 'B first' : 'A first'} | ${Math.round(r.rpsA)} | ${Math.round(r.rpsB)} | ${r.ratio.toFixed(4)} |`,
    ),
    '',
  ]
  writeFileSync(`${base}.md`, md.join('\n'))
  console.log(`wrote ${relative(process.cwd(), base)}.md and .json`)
}
await stopAll()
process.exit(0)
