#!/usr/bin/env node
// `npm test`: the suites in two lanes run side by side, each a jest run of its own on one worker.
//
//   timing  test/faults, test/multiprocess, test/cluster, test/overload (TIMING_DIRS in
//           scripts/unit-tests.cjs): the suites that stop and kill servers and processes, hold requests to
//           deadlines, or load a service to its capacity. Two of them at once would take each other's CPU
//           when a deadline is being measured, so they keep to one lane, one file at a time.
//   rest    every other suite: most of their time is spent waiting on servers, sockets and browsers,
//           which the other lane's waits overlap.
//
// Arguments go to both jest runs. With a test path or pattern, `--runInBand`/`-i`, `--watch`, or
// TOLLGATE_TEST_LANES=0, one jest run takes them as they are. `--json --outputFile=F` writes one results
// file per lane, merged into F when both have ended. Each lane's output lines are prefixed with its name.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const jest = require.resolve('jest/bin/jest')
const args = process.argv.slice(2)
const LANES = ['timing', 'rest']

// Options that take a value as the next argument, so that value is not read as a test path.
const WITH_VALUE = new Set(['-c', '--config', '--outputFile', '-t', '--testNamePattern', '--maxWorkers', '-w', '--reporters', '--shard'])
const positional = args.some((arg, i) => !arg.startsWith('-') && !WITH_VALUE.has(args[i - 1] ?? ''))
const single =
  process.env.TOLLGATE_TEST_LANES === '0' ||
  positional ||
  args.some((a) => ['-i', '--runInBand', '--watch', '--watchAll', '--testPathPattern', '--listTests'].includes(a.split('=')[0]))

if (single) {
  const child = spawn(process.execPath, [jest, ...args], { stdio: 'inherit' })
  child.on('exit', (code, signal) => process.exit(signal === null ? (code ?? 1) : 1))
} else {
  const outputAt = args.findIndex((a) => a === '--outputFile' || a.startsWith('--outputFile='))
  const output = outputAt < 0 ? undefined : args[outputAt].includes('=') ? args[outputAt].split('=')[1] : args[outputAt + 1]
  const laneArgs = (lane) => {
    if (output === undefined) return args
    const rest = args.filter((_, i) => i !== outputAt && !(i === outputAt + 1 && !args[outputAt].includes('=')))
    return [...rest, `--outputFile=${output}.${lane}`]
  }
  const children = LANES.map((lane) => {
    const child = spawn(process.execPath, [jest, ...laneArgs(lane)], {
      env: { ...process.env, TOLLGATE_LANE: lane },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    prefix(child.stdout, process.stdout, lane)
    prefix(child.stderr, process.stderr, lane)
    return new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal === null ? (code ?? 1) : 1)))
  })
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(1))
  const codes = await Promise.all(children)
  if (output !== undefined) merge(output)
  process.stdout.write(`lanes: ${LANES.map((lane, i) => `${lane} exited ${codes[i]}`).join(', ')}\n`)
  process.exit(codes.every((c) => c === 0) ? 0 : 1)
}

/** Copies `from` to `to` a line at a time, each line prefixed with the lane's name. */
function prefix(from, to, lane) {
  let partial = ''
  from.setEncoding('utf8')
  from.on('data', (chunk) => {
    const lines = (partial + chunk).split('\n')
    partial = lines.pop() ?? ''
    if (lines.length > 0) to.write(lines.map((line) => `[${lane}] ${line}\n`).join(''))
  })
  from.on('end', () => {
    if (partial !== '') to.write(`[${lane}] ${partial}\n`)
  })
}

/** The lanes' results files as one (what `--outputFile` would have written for a single run). */
function merge(output) {
  const parts = LANES.map((lane) => `${output}.${lane}`).filter((f) => existsSync(f))
  if (parts.length === 0) return
  const results = parts.map((f) => JSON.parse(readFileSync(f, 'utf8')))
  const sum = (field) => results.reduce((n, r) => n + (r[field] ?? 0), 0)
  const merged = { ...results[0] }
  for (const field of Object.keys(merged)) if (typeof merged[field] === 'number' && field.startsWith('num')) merged[field] = sum(field)
  merged.success = results.every((r) => r.success) && parts.length === LANES.length
  merged.startTime = Math.min(...results.map((r) => r.startTime))
  merged.testResults = results.flatMap((r) => r.testResults)
  writeFileSync(output, JSON.stringify(merged))
  for (const f of parts) rmSync(f)
}
