#!/usr/bin/env node
// What adaptive concurrency's decision costs one request, in process, with no HTTP: each request timed on its own
// (process.hrtime.bigint around the gate's calls), so the figure is a per-request p99, not a mean.
//
//   npm run bench -- adaptive-cost [--ops N] [--batch N]
//
// Paths, interleaved in batches (each path's batches alternate with the others' until every path has `ops`):
//   admit    under the limit: the request's class read from a header, a permit, and its release, which measures the
//            latency and, once an interval has passed, moves the limit (event-loop utilisation read then, as by default)
//   queued   at the limit: the request waits (a promise and its deadline timer), then a release hands it the slot
//            (both calls timed, the hand-over included)
//   shed     at the limit with a full queue of a higher class: the refusal and its 503
//   timer    two reads of the clock and nothing between them: what the measurement itself adds to each figure
// Writes nothing; the figures go to the terminal.
import { parseArgs } from 'node:util'
import { AdaptiveFront, Permit } from '@tollgate/core/adapter'

const { values } = parseArgs({
  options: {
    ops: { type: 'string', default: '1000000' },
    batch: { type: 'string', default: '10000' },
    help: { type: 'boolean', short: 'h' },
  },
})
if (values.help) {
  console.log('usage: node bench/adaptive-cost.mjs [--ops N] [--batch N]   (npm run bench -- adaptive-cost)')
  process.exit(0)
}
const OPS = Number(values.ops)
const BATCH = Number(values.batch)
const MIX = ['critical', 'normal', 'sheddable', 'normal', 'sheddable', 'normal', 'critical', 'normal', 'sheddable', 'normal']
const requests = MIX.map((priority) => ({ headers: { 'x-priority': priority } }))
const priority = (req) => req.headers['x-priority']
const now = process.hrtime.bigint

/** Under the limit: every request is admitted and released at once. */
function admitPath() {
  const front = new AdaptiveFront({ priority })
  let i = 0
  return (samples, at) => {
    const req = requests[i++ % requests.length]
    const t0 = now()
    const permit = front.enter(req)
    permit.release()
    samples[at] = Number(now() - t0)
    if (!(permit instanceof Permit)) throw new Error('admit: a request under the limit was not admitted')
  }
}

/** At a fixed limit of 4: each request waits, and a release of one of the 4 in flight hands it the slot. */
function queuedPath() {
  const front = new AdaptiveFront({ priority, initialLimit: 4, minLimit: 4, maxLimit: 4, queueTimeout: '1h', eventLoopUtilization: false })
  const held = []
  for (let n = 0; n < 4; n++) held.push(front.enter(requests[1]))
  let i = 0
  return async (samples, at) => {
    const req = requests[i++ % requests.length]
    const t0 = now()
    const waiting = front.enter(req)
    held.shift().release()
    samples[at] = Number(now() - t0)
    const permit = await waiting
    if (!(permit instanceof Permit)) throw new Error('queued: a waiter was refused')
    held.push(permit)
  }
}

/** At a fixed limit of 4 and a queue of one normal waiter: every sheddable request is refused at once. */
function shedPath() {
  const front = new AdaptiveFront({
    priority,
    initialLimit: 4,
    minLimit: 4,
    maxLimit: 4,
    maxQueue: 1,
    queueTimeout: '1h',
    eventLoopUtilization: false,
  })
  for (let n = 0; n < 5; n++) front.enter(requests[1])
  return (samples, at) => {
    const t0 = now()
    const answer = front.enter(requests[2])
    samples[at] = Number(now() - t0)
    if (answer.status !== 503) throw new Error('shed: a sheddable request was not refused')
  }
}

function timerPath() {
  return (samples, at) => {
    const t0 = now()
    samples[at] = Number(now() - t0)
  }
}

const paths = { admit: admitPath(), queued: queuedPath(), shed: shedPath(), timer: timerPath() }
const samples = Object.fromEntries(Object.keys(paths).map((name) => [name, new Float64Array(OPS)]))

// Warm-up: the JIT compiles each path before anything is kept.
const scratch = new Float64Array(BATCH)
for (const run of Object.values(paths)) for (let n = 0; n < BATCH; n++) await run(scratch, n)

for (let done = 0; done < OPS; done += BATCH) {
  for (const [name, run] of Object.entries(paths)) {
    const into = samples[name]
    const end = Math.min(OPS, done + BATCH)
    for (let at = done; at < end; at++) {
      const pending = run(into, at)
      if (pending !== undefined) await pending
    }
  }
}

const q = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]
const us = (ns) => (ns / 1000).toFixed(2)
console.log(`Adaptive concurrency, the decision per request: ${OPS} requests per path, each timed on its own (µs)`)
console.log('| path | p50 | p99 | p99.9 | max |')
console.log('|---|--:|--:|--:|--:|')
for (const [name, xs] of Object.entries(samples)) {
  const sorted = xs.sort()
  console.log(`| ${name} | ${us(q(sorted, 0.5))} | ${us(q(sorted, 0.99))} | ${us(q(sorted, 0.999))} | ${us(sorted[sorted.length - 1])} |`)
}
