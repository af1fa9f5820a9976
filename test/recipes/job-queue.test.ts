import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { redisUrl, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { sleep } from '../support/time'
import type { Job, JobSource } from './job-queue'
import * as recipe from './job-queue'
import { recipeCode, recipeFile } from './recipe'

// docs/recipes/job-queue.md, run: ./job-queue.ts is the document's code, verbatim (the first test checks
// it), run against the test's redis-server and a local upstream that answers 429 past 5 calls in a
// second, as a rate-limited API would.

/** A geocoder allowing 5 calls a second (its own fixed windows), 429 past that. */
class Upstream {
  readonly perWindow = new Map<number, number>()
  refused = 0
  private readonly server: Server = createServer((req, res) => {
    const window = Math.floor(Date.now() / 1000)
    const n = (this.perWindow.get(window) ?? 0) + 1
    this.perWindow.set(window, n)
    if (n > 5) {
      this.refused++
      res.writeHead(429, { 'retry-after': '1' }).end()
      return
    }
    const address = new URL(req.url ?? '/', 'http://upstream').searchParams.get('q')
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ address, lat: 48.85, lng: 2.35 }))
  })
  async start(): Promise<string> {
    await new Promise<void>((ready) => this.server.listen(0, '127.0.0.1', ready))
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }
  async stop(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise((closed) => this.server.close(closed))
  }
  get calls(): number {
    return [...this.perWindow.values()].reduce((a, b) => a + b, 0)
  }
}

/**
 * Starts a batch early in a second: the upstream counts by arrival, and a call admitted in the last
 * millisecond of one of the limiter's windows could arrive in the next (the recipe's last point).
 */
async function earlyInASecond(): Promise<void> {
  const phase = Date.now() % 1000
  if (phase > 300) await sleep(1000 - phase)
}

const jobs = (n: number): Job[] => Array.from({ length: n }, (_, i) => ({ id: `job-${i}`, address: `${i} rue de Rivoli, Paris` }))

const db = useRedis()
let upstream: Upstream
let url: string

beforeEach(async () => {
  upstream = new Upstream()
  url = await upstream.start()
})
afterEach(async () => {
  await upstream.stop()
})

describe('recipe: a job queue that waits for a rate-limited upstream', () => {
  it('runs the code of docs/recipes/job-queue.md as written there', () => {
    expect(recipeFile('job-queue')).toBe(recipeCode('job-queue'))
  })

  it('runs 12 jobs through 4 workers at 5 calls a second, with no 429 from the upstream', async () => {
    const limiter = recipe.upstreamLimit(db.client, testPrefix('recipe-jobs'))
    await earlyInASecond()
    const { done, later } = await recipe.runJobs(jobs(12), { limiter, upstream: url, concurrency: 4, maxWaitMs: 10_000 })

    expect(later).toEqual([])
    expect(done.map((d) => d.job.id).sort()).toEqual(
      jobs(12)
        .map((j) => j.id)
        .sort(),
    )
    expect(done.every(({ job, body }) => (body as { address: string }).address === job.address)).toBe(true)
    expect(upstream.refused).toBe(0)
    expect(upstream.calls).toBe(12)
    expect(upstream.perWindow.size).toBe(3) // 5, 5 and 2: the waits took the next windows, none was refused
  })

  it('puts the jobs that cannot go within maxWaitMs back for later, with the time to wait, and fails none', async () => {
    const limiter = recipe.upstreamLimit(db.client, testPrefix('recipe-later'))
    await earlyInASecond()
    const { done, later } = await recipe.runJobs(jobs(12), { limiter, upstream: url, concurrency: 4, maxWaitMs: 200 })

    expect(done.length + later.length).toBe(12)
    expect(done.length).toBeGreaterThanOrEqual(5)
    expect(later.length).toBeGreaterThan(0)
    expect(later.every((l) => l.afterMs > 0 && l.afterMs <= 1000)).toBe(true)
    expect(upstream.refused).toBe(0)
    expect(upstream.calls).toBe(done.length) // a job put back made no call
  })

  it('main: a worker process runs the queue against REDIS_URL and GEOCODER_URL until it is stopped', async () => {
    process.env.REDIS_URL = redisUrl()
    process.env.GEOCODER_URL = url
    const queue = jobs(8)
    const finished: string[] = []
    const stop = new AbortController()
    const source: JobSource = {
      take: async (max) => queue.splice(0, max),
      finish: async (job) => {
        finished.push(job.id)
        if (finished.length === 8) stop.abort()
      },
      retry: async (job) => {
        queue.push(job)
      },
    }
    await earlyInASecond()
    await recipe.main(source, stop.signal)

    expect(finished.sort()).toEqual(
      jobs(8)
        .map((j) => j.id)
        .sort(),
    )
    expect(upstream.refused).toBe(0)
  })
})
