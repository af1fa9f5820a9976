import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import type { AlgorithmName } from '@tollgate/core'
import { Redis } from 'ioredis'
import { type RedisServer, startRedisServer } from '../harness/redis-server'

// 50 fresh processes against a healthy local Redis, each making its first
// decision right after building its client and limiter: none of those decisions may come from the
// fallback. A cold start (connect, ready check, NOSCRIPT then EVAL) is not an outage of the store.
const PROCESSES = 50
// The processes take turns through the default fixed window (MULTI/EXEC) and the three scripted
// algorithms, so the processes of one batch share no script, and the server's script cache is flushed
// before each batch: every scripted first decision finds its script missing, as after a Redis restart
// or on a fresh server.
const ALGORITHMS: readonly AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log']
// Processes started together. Each one's decision runs while the others of its batch are still
// starting (loading modules), which on a 2-core machine is CPU they compete for.
const BATCH = 2
// A worker that has not printed its decision by then is killed (by PID) and reported.
const WORKER_TIMEOUT_MS = 20_000
const WORKER = join(__dirname, 'cold-start-worker.ts')
const ROOT = join(__dirname, '..', '..')

interface FirstDecision {
  source: string
  allowed: boolean
  ms: number
  statusAtDecision: string
  logs: string[]
  clientErrors: string[]
  algorithm: AlgorithmName
}

let redis: RedisServer
let admin: Redis

beforeAll(async () => {
  // A server of this file's own: SCRIPT FLUSH must not touch a server other test files share.
  redis = await startRedisServer()
  admin = new Redis(redis.url, { disconnectTimeout: 0 })
  await admin.ping()
})
afterAll(async () => {
  admin.disconnect()
  await redis.stop()
})

/** Runs one fresh worker process to its end; resolves with its decision. */
function firstDecision(algorithm: AlgorithmName, prefix: string): Promise<FirstDecision> {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
    cwd: ROOT,
    env: { ...process.env, REDIS_URL: redis.url, PREFIX: prefix, ALGORITHM: algorithm },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8')
  })
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8')
  })
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), WORKER_TIMEOUT_MS)
    child.once('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      const line = stdout.trim().split('\n').pop() ?? ''
      if (code === 0 && line.startsWith('{')) return resolve({ ...(JSON.parse(line) as Omit<FirstDecision, 'algorithm'>), algorithm })
      reject(
        new Error(`cold-start worker (pid ${child.pid}, ${algorithm}) ended with ${signal ?? code}; stdout: ${stdout}; stderr: ${stderr}`),
      )
    })
  })
}

it(`${PROCESSES} fresh processes against a healthy Redis: no first decision comes from the fallback`, async () => {
  const results: FirstDecision[] = []
  for (let first = 0; first < PROCESSES; first += BATCH) {
    await admin.script('FLUSH')
    const batch = Array.from({ length: Math.min(BATCH, PROCESSES - first) }, (_, i) => ALGORITHMS[(first + i) % ALGORITHMS.length]!)
    results.push(...(await Promise.all(batch.map((algorithm) => firstDecision(algorithm, `cold-${randomUUID()}:`)))))
  }

  const byAlgorithm: Record<string, { n: number; fallback: number; maxMs: number }> = {}
  for (const r of results) {
    const a = byAlgorithm[r.algorithm] ?? { n: 0, fallback: 0, maxMs: 0 }
    byAlgorithm[r.algorithm] = a
    a.n++
    if (r.source === 'fallback') a.fallback++
    a.maxMs = Math.max(a.maxMs, Math.round(r.ms))
  }
  const sources: Record<string, number> = {}
  for (const r of results) sources[r.source] = (sources[r.source] ?? 0) + 1
  const ms = results.map((r) => r.ms).sort((a, b) => a - b)
  console.info(
    'cold start:',
    JSON.stringify({
      processes: results.length,
      sources,
      firstDecisionMs: { p50: Math.round(ms[Math.floor(ms.length / 2)]!), max: Math.round(ms[ms.length - 1]!) },
      byAlgorithm,
      statusAtDecision: [...new Set(results.map((r) => r.statusAtDecision))],
      logs: [...new Set(results.flatMap((r) => r.logs))],
    }),
  )
  expect(results).toHaveLength(PROCESSES)
  expect(results.flatMap((r) => r.clientErrors)).toEqual([])
  // Every first decision from Redis; the fallback ones listed with their algorithm and time.
  expect(results.filter((r) => r.source !== 'store').map((r) => `${r.algorithm}: ${r.source} after ${Math.round(r.ms)} ms`)).toEqual([])
}, 180_000)
