import { type ChildProcess, fork } from 'node:child_process'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { quitClient, testPrefix } from '../harness/redis'
import type { RedisServer } from '../harness/redis-server'
import { startTestServer, testServers } from '../harness/servers'

// Four processes lease one key's quota from one Redis (the `lease` option): whatever happens to Redis,
// the requests they admit in a window never pass max, by Redis's count and by their own decisions; and at
// twice the limit, steady, they admit nearly all of it. The time is scaled down (2,000 per 2 s) to keep
// the test short; the property does not depend on the scale. TOLLGATE_LEASE_MAX and
// TOLLGATE_LEASE_WINDOW_MS run it at another (10000 and 10000: 10,000 per 10 s, as users configure it).

const PROCESSES = 4
const MAX = Number(process.env.TOLLGATE_LEASE_MAX ?? 2000)
const WINDOW_MS = Number(process.env.TOLLGATE_LEASE_WINDOW_MS ?? 2000)
/** How long one flood may take, and a test with it. */
const FLOOD_LIMIT_MS = 4 * WINDOW_MS + 32_000
const children: ChildProcess[] = []
let server: RedisServer
let client: Redis

beforeAll(async () => {
  server = await startTestServer(testServers()[0]!)
  client = new Redis(server.url, { disconnectTimeout: 0, maxRetriesPerRequest: 1 })
  client.on('error', () => {})
})

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM')
  await quitClient(client)
  await server.stop()
})

interface Report {
  admitted: Record<string, number>
  sources: Record<string, number>
}

function worker(env: Record<string, string>): Promise<Report> {
  const child = fork(join(__dirname, 'lease-worker.mjs'), [], {
    cwd: join(__dirname, '..', '..'),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  children.push(child)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`a lease worker did not report within ${FLOOD_LIMIT_MS} ms (is the package built? npm run build)`)),
      FLOOD_LIMIT_MS,
    )
    child.once('message', (m) => {
      clearTimeout(timer)
      resolve(m as Report)
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      if (code !== 0) reject(new Error(`a lease worker exited with ${code} (is the package built? npm run build)`))
    })
  })
}

/** Starts the workers at the next window edge plus a little; resolves with each one's report and the start's window. */
async function flood(prefix: string, rate: number, windows: number, during?: (startAt: number) => Promise<void>) {
  // At least a whole window ahead: the workers (a Node process and a connection each) must be flooding when
  // the first window opens, or that window sees only the end of the flood (a late start, not a lower rate).
  const startAt = (Math.floor(Date.now() / WINDOW_MS) + 2) * WINDOW_MS + 50
  const env = {
    REDIS_URL: server.url,
    PREFIX: prefix,
    MAX: String(MAX),
    WINDOW_MS: String(WINDOW_MS),
    RATE: String(rate),
    START_AT: String(startAt),
    DURATION_MS: String(windows * WINDOW_MS - 100),
  }
  const reports = Promise.all(Array.from({ length: PROCESSES }, () => worker(env)))
  await during?.(startAt)
  const all = await reports
  const total: Record<string, number> = {}
  for (const r of all) for (const [w, n] of Object.entries(r.admitted)) total[w] = (total[w] ?? 0) + n
  return { total, first: Math.floor(startAt / WINDOW_MS), reports: all }
}

const until = (at: number) => new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())))

it(
  `${PROCESSES} processes flooding one key never admit more than max per window, through a 200 ms stall and a restart`,
  async () => {
    const prefix = testPrefix('lease-mp')
    const counted: Record<string, number> = {}
    const { total, first } = await flood(prefix, 1500, 4, async (startAt) => {
      const first = Math.floor(startAt / WINDOW_MS)
      // Window 0 is over: Redis's own count of it, before anything happens to Redis.
      await until(startAt + WINDOW_MS + 100)
      counted[first] = Number(await client.get(`${prefix}{hot}:${first}`))
      // A 200 ms stall in window 1, while the processes hold slices and the window still has quota left (the
      // flood, three times the limit, spends it by a third of the window).
      await until(startAt + WINDOW_MS + 0.1 * WINDOW_MS)
      server.freeze()
      await new Promise((r) => setTimeout(r, 200))
      server.thaw()
      await until(startAt + 2 * WINDOW_MS + 100)
      counted[first + 1] = Number(await client.get(`${prefix}{hot}:${first + 1}`))
      // A restart early in window 2, quota still left: Redis comes back empty.
      await until(startAt + 2 * WINDOW_MS + 0.1 * WINDOW_MS)
      await server.restart()
    })
    console.info(`max ${MAX} per ${WINDOW_MS} ms: admitted per window ${JSON.stringify(total)}; Redis counted ${JSON.stringify(counted)}`)
    expect(Object.keys(total)).toHaveLength(4)
    for (const w of Object.keys(total)) expect([w, total[w]! <= MAX]).toEqual([w, true])
    // The window before anything happened admitted what Redis counted, all of it granted.
    expect(total[first]).toBeLessThanOrEqual(counted[first]!)
    expect(counted[first]).toBe(MAX)
    expect(counted[first + 1]).toBeLessThanOrEqual(MAX)
    expect(total[first + 1]).toBeLessThanOrEqual(counted[first + 1]!)
  },
  FLOOD_LIMIT_MS + 20_000,
)

it(
  'at twice the limit, steady, they admit at least 98% of max in every window',
  async () => {
    const prefix = testPrefix('lease-mp')
    // 4 × 500 a second = 2,000 a second against 2,000 per 2 s.
    const { total, first } = await flood(prefix, 500, 3)
    console.info(`max ${MAX} per ${WINDOW_MS} ms, offered twice that: admitted per window ${JSON.stringify(total)}`)
    for (let w = first; w < first + 3; w++) {
      expect(total[w]).toBeLessThanOrEqual(MAX)
      expect([w, total[w]! >= 0.98 * MAX]).toEqual([w, true])
    }
  },
  FLOOD_LIMIT_MS + 20_000,
)
