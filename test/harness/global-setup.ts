import { Redis } from 'ioredis'
import { TEST_REDIS_URL_ENV } from './redis'
import { type RedisServer, startRedisServer } from './redis-server'
import { testServers } from './servers'

/**
 * Where setup leaves the server it started, for global-teardown.ts. jest runs both in its main
 * process, so a global is enough; Symbol.for keeps it findable even if the modules load twice.
 */
export const GLOBAL_SERVER_KEY = Symbol.for('tollgate.test.globalRedisServer')

type GlobalWithServer = typeof globalThis & { [GLOBAL_SERVER_KEY]?: RedisServer }

const EXTERNAL_PING_TIMEOUT_MS = 3000

/** The URL without its password, for error messages that end up in CI logs. */
function redact(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.toString()
  } catch {
    return url
  }
}

async function assertAnswersPing(url: string): Promise<void> {
  let client: Redis | undefined
  let timer: NodeJS.Timeout | undefined
  // ioredis rejects connect() with a bare "Connection is closed."; the 'error' event has the cause (ECONNREFUSED...).
  let cause: Error | undefined
  try {
    client = new Redis(url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: EXTERNAL_PING_TIMEOUT_MS,
      commandTimeout: EXTERNAL_PING_TIMEOUT_MS,
    })
    client.on('error', (error: Error) => {
      cause ??= error
    })
    const c = client
    // One overall bound: connectTimeout alone does not cover a server that accepts but never replies.
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no PONG within ${EXTERNAL_PING_TIMEOUT_MS} ms`)), EXTERNAL_PING_TIMEOUT_MS)
    })
    const reply = await Promise.race([c.connect().then(() => c.ping()), timeout])
    if (reply !== 'PONG') throw new Error(`unexpected reply ${JSON.stringify(reply)}`)
  } catch (error) {
    throw new Error(
      `REDIS_URL=${redact(url)} did not answer PING within ${EXTERNAL_PING_TIMEOUT_MS / 1000} s (${(cause ?? (error as Error)).message}). ` +
        'Start that server, correct REDIS_URL, or unset it so the tests start their own redis-server.',
    )
  } finally {
    clearTimeout(timer)
    client?.disconnect()
  }
}

/**
 * jest globalSetup: makes one Redis server available to every test file through
 * TOLLGATE_TEST_REDIS_URL. Fails, never skips, when no Redis can be had.
 */
export default async function globalSetup(): Promise<void> {
  const external = process.env.REDIS_URL
  if (external !== undefined && external !== '') {
    await assertAnswersPing(external)
    process.env[TEST_REDIS_URL_ENV] = external
    return
  }
  // The first server of the matrix (servers.ts), which the suites that run on each server use as is.
  const server = await startRedisServer({ bin: testServers()[0]!.bin })
  ;(globalThis as GlobalWithServer)[GLOBAL_SERVER_KEY] = server
  // jest forks its workers after globalSetup, so they inherit this (checked with -w 2 and -i).
  process.env[TEST_REDIS_URL_ENV] = server.url
}
