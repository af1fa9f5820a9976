import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { keysWithoutTtl, redisUrl, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { get } from '../support/http'

// Several Node processes behind one Redis enforce one global count exactly: the count lives in
// Redis and every process decides from the value INCRBY returned.
const PROCESSES = 4
const children: ChildProcess[] = []
const db = useRedis()

afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM')
})

function startWorker(env: Record<string, string>): Promise<number> {
  const child = spawn(process.execPath, [join(__dirname, 'worker-server.mjs')], {
    cwd: join(__dirname, '..', '..'),
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  children.push(child)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('worker did not start within 10 s (is the package built? npm run build)')), 10_000)
    child.once('exit', (code) => reject(new Error(`worker exited with ${code} (is the package built? npm run build)`)))
    child.stdout!.once('data', (chunk: Buffer) => {
      clearTimeout(timer)
      resolve(Number(chunk.toString().trim()))
    })
  })
}

it(`${PROCESSES} processes behind one Redis admit exactly 100 of 2000 concurrent requests from one client`, async () => {
  const env = { REDIS_URL: redisUrl(), PREFIX: testPrefix('multi-process'), NOW: String(Date.now()), MAX: '100' }
  const ports = await Promise.all(Array.from({ length: PROCESSES }, () => startWorker(env)))
  const replies = await Promise.all(
    Array.from({ length: 2000 }, (_, i) => get(`http://127.0.0.1:${ports[i % PROCESSES]}/`, { timeoutMs: 20_000 })),
  )
  const statuses: Record<number, number> = {}
  const answeredBy: Record<number, number> = {}
  replies.forEach((r, i) => {
    statuses[r.status] = (statuses[r.status] ?? 0) + 1
    if (r.status === 200 || r.status === 429) answeredBy[ports[i % PROCESSES]!] = (answeredBy[ports[i % PROCESSES]!] ?? 0) + 1
  })
  // Each process answered its 500 requests; counting alone, each would have admitted 100 (400 in
  // all), so exactly 100 admitted in total is the shared count. Which process admits them is timing:
  // one process's merged INCRBY may reach Redis first and take all 100 positions.
  expect(Object.values(answeredBy)).toEqual(Array(PROCESSES).fill(2000 / PROCESSES))
  expect(statuses).toEqual({ 200: 100, 429: 1900 })
  expect(await keysWithoutTtl(db.client, env.PREFIX)).toEqual([])
})
