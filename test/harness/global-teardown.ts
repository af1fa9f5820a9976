import { GLOBAL_SERVER_KEY } from './global-setup'
import { TEST_REDIS_URL_ENV } from './redis'
import type { RedisServer } from './redis-server'

type GlobalWithServer = typeof globalThis & { [GLOBAL_SERVER_KEY]?: RedisServer }

/** jest globalTeardown: stops the server global-setup.ts started; a REDIS_URL server is left alone. */
export default async function globalTeardown(): Promise<void> {
  const holder = globalThis as GlobalWithServer
  const server = holder[GLOBAL_SERVER_KEY]
  delete holder[GLOBAL_SERVER_KEY]
  // In watch mode the next run's setup sets it again; a stale URL must not outlive its server.
  delete process.env[TEST_REDIS_URL_ENV]
  await server?.stop()
}
