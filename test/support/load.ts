import { get } from './http'

export interface Sample {
  status: number
  ms: number
  source: string
  at: number
}

/**
 * Runs `concurrency` request loops against `url` until `stop()` says so, recording every reply.
 * Bounded: it also stops after `maxMs` or `maxRequests`, whichever comes first.
 */
export function loadLoop(
  url: string,
  options: { concurrency: number; maxMs: number; maxRequests: number; headers?: (i: number) => Record<string, string> },
) {
  const samples: Sample[] = []
  const errors: unknown[] = []
  let stopped = false
  const started = Date.now()
  let sent = 0
  const loops = Array.from({ length: options.concurrency }, async (_, worker) => {
    while (!stopped && Date.now() - started < options.maxMs && sent < options.maxRequests) {
      const i = sent++
      const t = performance.now()
      try {
        const reply = await get(url, { headers: options.headers?.(worker * 1_000_000 + i), timeoutMs: 5000 })
        samples.push({ status: reply.status, ms: performance.now() - t, source: reply.body, at: Date.now() })
      } catch (error) {
        errors.push(error)
      }
    }
  })
  const done = Promise.all(loops)
  return {
    samples,
    errors,
    stop: async () => {
      stopped = true
      await done
    },
  }
}
