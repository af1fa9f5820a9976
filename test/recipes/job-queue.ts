import { setTimeout as sleep } from 'node:timers/promises'
import { Limiter, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'

/** One job for the upstream: here, an address to geocode. */
export interface Job {
  id: string
  address: string
}

/** What became of a batch: the jobs done, and the jobs to run again later (not failed). */
export interface BatchResult {
  done: Array<{ job: Job; body: unknown }>
  later: Array<{ job: Job; afterMs: number }>
}

/** The upstream's allowance, 5 calls a second, counted in Redis so that every worker process shares it. */
export function upstreamLimit(redis: Redis, prefix = 'tg:geocoder:'): Limiter {
  return new Limiter({ max: 5, window: '1s', store: new RedisStore({ client: redis }), prefix })
}

/**
 * Runs `jobs`, `concurrency` calls at a time. Each call waits for the limit, up to `maxWaitMs`, instead of
 * failing; a job that cannot go within that time, or that the upstream refuses all the same, comes back
 * in `later` with how long to wait.
 */
export async function runJobs(
  jobs: readonly Job[],
  options: { limiter: Limiter; upstream: string; concurrency?: number; maxWaitMs?: number; signal?: AbortSignal },
): Promise<BatchResult> {
  const { limiter, upstream, concurrency = 4, maxWaitMs = 30_000, signal } = options
  const result: BatchResult = { done: [], later: [] }
  const pending = [...jobs]
  const worker = async (): Promise<void> => {
    for (let job = pending.shift(); job !== undefined; job = pending.shift()) {
      // Waits in line with this process's other calls; counted in Redis with every other process's.
      const decision = await limiter.wait('geocoder', { maxWaitMs, signal })
      if (!decision.allowed) {
        // Not admitted within maxWaitMs, or shutting down: the job goes back, nothing was called.
        result.later.push({ job, afterMs: decision.retryAfterMs })
        continue
      }
      const response = await fetch(`${upstream}/geocode?q=${encodeURIComponent(job.address)}`, { signal })
      if (response.status === 429) {
        // Someone else calls with the same API key, or the upstream counts its own way: honour its word.
        result.later.push({ job, afterMs: Number(response.headers.get('retry-after') ?? '1') * 1000 })
        continue
      }
      if (!response.ok) throw new Error(`the geocoder answered ${response.status} to job ${job.id}`)
      result.done.push({ job, body: await response.json() })
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return result
}

/** Where jobs come from and go back to: your queue (BullMQ, SQS, a database table...). */
export interface JobSource {
  take(max: number): Promise<Job[]>
  finish(job: Job, body: unknown): Promise<void>
  retry(job: Job, afterMs: number): Promise<void>
}

/** A worker process: runs batches from `source` until `signal` aborts. */
export async function main(source: JobSource, signal: AbortSignal): Promise<void> {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  const limiter = upstreamLimit(redis)
  const upstream = process.env.GEOCODER_URL ?? 'https://geocoder.example'
  try {
    while (!signal.aborted) {
      const jobs = await source.take(20)
      if (jobs.length === 0) {
        await sleep(1000, undefined, { signal }).catch(() => {})
        continue
      }
      const { done, later } = await runJobs(jobs, { limiter, upstream, signal })
      for (const { job, body } of done) await source.finish(job, body)
      for (const { job, afterMs } of later) await source.retry(job, afterMs)
    }
  } finally {
    await redis.quit()
  }
}
