// One fresh process for cold-start.test.ts: builds an ioredis client, a RedisStore and a Limiter as
// an application does at startup, and makes ONE decision at once, without waiting for the client to
// be ready. Prints one JSON line: where the decision came from and how long it took.
//
// Run with `node --import tsx` from the repository root, so @tollgate/core resolves through
// tsconfig.json's paths to packages/core/src, the same sources jest tests (no build needed).

import { type AlgorithmName, Limiter, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'

async function main(): Promise<void> {
  const { REDIS_URL, PREFIX, ALGORITHM } = process.env
  if (REDIS_URL === undefined || PREFIX === undefined || ALGORITHM === undefined) {
    throw new Error('cold-start-worker needs REDIS_URL, PREFIX and ALGORITHM')
  }
  const logs: string[] = []
  const client = new Redis(REDIS_URL, { disconnectTimeout: 0 })
  const clientErrors: string[] = []
  client.on('error', (error: Error) => void clientErrors.push(error.message))
  const limiter = new Limiter({
    max: 10,
    window: '1 minute',
    algorithm: ALGORITHM as AlgorithmName,
    prefix: PREFIX,
    store: new RedisStore({ client }),
    logger: { warn: (m: string) => void logs.push(m), error: (m: string) => void logs.push(m) },
  })
  const statusAtDecision = client.status
  const started = performance.now()
  const decision = await limiter.consume('cold-start-client')
  const ms = performance.now() - started
  process.stdout.write(
    `${JSON.stringify({ source: decision.source, allowed: decision.allowed, ms, statusAtDecision, logs, clientErrors })}\n`,
  )
  client.disconnect()
}

main().catch((error: unknown) => {
  process.stderr.write(`cold-start-worker: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
  process.exitCode = 1
})
