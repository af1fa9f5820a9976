// Run wrk once and return its numbers (parsed from the JSON line that wrk/report.lua prints).
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { pinned, spawnTracked, stopChild } from './procs.mjs'

export const WRK_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'wrk')

/**
 * @param {object} o
 * @param {number} o.port
 * @param {number} o.seconds     whole seconds (wrk does not take fractions)
 * @param {number} o.connections
 * @param {'one'|'many'} o.script
 * @param {number} [o.clients]   distinct X-Forwarded-For addresses for the 'many' script
 * @param {number} [o.core]      CPU core to pin wrk to
 * @param {object} [o.env]       more environment for the script (paced.lua's BENCH_PACE_MS)
 */
export async function runWrk({ port, seconds, connections, script, clients = 10000, core = 1, path = '/', env = {} }) {
  const [cmd, args] = pinned(core, 'wrk', [
    '-t1',
    `-c${connections}`,
    `-d${seconds}s`,
    '--timeout',
    '5s',
    '--latency',
    '-s',
    join(WRK_DIR, `${script}.lua`),
    `http://127.0.0.1:${port}${path}`,
  ])
  const child = spawnTracked('wrk', cmd, args, {
    env: { ...process.env, BENCH_WRK_DIR: WRK_DIR, BENCH_CLIENTS: String(clients), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (err += d))
  const limitMs = (seconds + 20) * 1000
  const timer = setTimeout(() => stopChild(child, 1000), limitMs)
  // 'close', not 'exit': at 'exit' wrk's stdout may not have been read yet (seen when several wrk
  // processes end at once on a busy machine, e.g. the parallel warm-up), and the result line is lost.
  const code = await new Promise((resolve) => child.once('close', (c, s) => resolve(s ?? c)))
  clearTimeout(timer)
  const m = out.match(/^WRK_JSON (\{.*\})$/m)
  if (!m) {
    throw new Error(`wrk on port ${port} gave no result (exit ${code}, limit ${limitMs} ms):\n${out}\n${err}`.trim())
  }
  const r = JSON.parse(m[1])
  r.rps = r.requests / (r.duration_us / 1e6)
  r.socket_errors = r.connect_errors + r.read_errors + r.write_errors + r.timeouts
  // wrk/paced.lua also prints the latency at every 0.1% (µs), for pooling slices (pooledPercentile).
  const q = out.match(/^WRK_QUANTILES ([\d.,]+)$/m)
  if (q) r.quantiles = q[1].split(',').map(Number)
  return r
}

/**
 * The `p`th percentile (0–100), in µs, of the requests of several wrk runs taken together, from each
 * run's latency at every 0.1% (`quantiles`, wrk/paced.lua), each point weighing a 999th of its run's
 * requests.
 */
export function pooledPercentile(runs, p) {
  const points = runs.flatMap((r) => r.quantiles.map((us) => [us, r.requests / r.quantiles.length]))
  points.sort((a, b) => a[0] - b[0])
  const total = points.reduce((sum, [, w]) => sum + w, 0)
  let seen = 0
  for (const [us, w] of points) {
    seen += w
    if (seen >= (p / 100) * total) return us
  }
  return points.length === 0 ? Number.NaN : points[points.length - 1][0]
}
