// The benchmarks besides the HTTP one, as subcommands of `npm run bench`: `npm run bench -- store --quick` runs
// `node bench/store-bench.mjs --quick`. Each script stays runnable on its own; this only saves remembering file
// names and the node flags the in-process ones need.
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { BENCH_DIR } from './out.mjs'

// What the in-process benchmarks need: gc() between slices, and a young generation large enough that a whole
// slice runs without a collection (bytes per request are the heap's growth over such a slice).
const IN_PROCESS = ['--expose-gc', '--min-semi-space-size=256', '--max-semi-space-size=256']

export const SUBCOMMANDS = {
  store: { script: 'store-bench.mjs', what: 'Redis store decisions per second, no HTTP (~1 min; --quick ~15 s)' },
  cost: {
    script: 'store-cost.mjs',
    what: 'what each algorithm costs Redis beside the fixed window: keys, memory, commands and CPU per decision (~1 min)',
  },
  'hot-path': { script: 'hot-path.mjs', flags: IN_PROCESS, what: 'ns and bytes per request through core, in process (~30 s)' },
  'hook-cost': {
    script: 'hook-cost.mjs',
    flags: IN_PROCESS,
    what: "ns and bytes each memory limiter adds to a framework's request, in process (~4 min)",
  },
  'adaptive-cost': { script: 'adaptive-cost.mjs', what: "adaptive concurrency's decision per request, p50 and p99, in process (~10 s)" },
  'express-ip': { script: 'express-ip.mjs', flags: IN_PROCESS, what: "one read of Express's client address, in process (~1 min)" },
  instructions: { script: 'instructions.mjs', what: "instructions per request of each case's server, under callgrind (needs valgrind)" },
  profile: { script: 'profile.mjs', what: "a case's server time per request by function, under load (needs linux-perf)" },
  corun: { script: 'corun.mjs', what: "two cases' servers on one core in the same seconds: their ratio of req/s" },
  headline: { script: 'headline.mjs', what: "the README's headline table from a run's JSON (default bench/RESULTS.json)" },
  overload: {
    script: 'overload.mjs',
    what: 'a service offered 3× its capacity, halved mid-run: no protection, a static cap, under-pressure, adaptive concurrency (~5 min; --quick ~1.5 min)',
  },
  lease: {
    script: 'lease.mjs',
    what: 'quota leasing under one hot key: 4 processes, a 1 ms delay proxy to Redis (~4-5 min; --quick ~1.5 min)',
  },
}

/** The help's list of subcommands. */
export const subcommandHelp = () =>
  Object.entries(SUBCOMMANDS)
    .map(([name, s]) => `  ${name.padEnd(13)} ${s.what}\n  ${''.padEnd(13)} node ${[...(s.flags ?? []), `bench/${s.script}`].join(' ')}`)
    .join('\n')

/** Runs a subcommand's script with the rest of the arguments; resolves to its exit status. */
export function runSubcommand(name, args) {
  const s = SUBCOMMANDS[name]
  const child = spawn(process.execPath, [...(s.flags ?? []), join(BENCH_DIR, s.script), ...args], { stdio: 'inherit' })
  // Ctrl-C reaches the child from the terminal as well; a signal sent to this process alone is passed on. Either
  // way the child stops what it started, then exits, and this process exits with it.
  process.on('SIGINT', () => {})
  for (const sig of ['SIGTERM', 'SIGHUP']) process.on(sig, () => child.kill(sig))
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))))
}
