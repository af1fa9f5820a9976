import { Redis } from 'ioredis'
import type { RedisServer } from '../harness/redis-server'
import { startTestServer, type TestServer, testServers } from '../harness/servers'

/** A test file's own redis-server, an ioredis client on it, and a logger that keeps what the limiter logs. */
export interface OwnRedis {
  readonly server: RedisServer
  readonly client: Redis
  readonly logs: string[]
  readonly logger: { warn(message: string): void; error(message: string): void }
}

/**
 * Starts a server of the file's own (of `matrixServer`, default the first of the matrix) before its tests (so they can freeze, kill and restart it)
 * and stops it after them. The client keeps ioredis's request defaults (offline queue on, retries), as
 * an app's does; its errors are swallowed, since a frozen or killed server must not crash the test.
 */
export function ownRedis(matrixServer: TestServer = testServers()[0]!): OwnRedis {
  const logs: string[] = []
  let server: RedisServer | undefined
  let client: Redis | undefined
  beforeAll(async () => {
    server = await startTestServer(matrixServer)
    client = new Redis(server.url, { disconnectTimeout: 0 })
    client.on('error', () => {})
    await client.ping()
  })
  afterAll(async () => {
    server?.thaw()
    client?.disconnect()
    await server?.stop()
  })
  return {
    get server() {
      return server!
    },
    get client() {
      return client!
    },
    logs,
    logger: { warn: (m) => void logs.push(m), error: (m) => void logs.push(m) },
  }
}
