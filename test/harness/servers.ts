import { execFileSync } from 'node:child_process'
import { accessSync, constants as fsConstants } from 'node:fs'
import { basename, delimiter, join } from 'node:path'
import { redisUrl } from './redis'
import { type RedisServer, type StartRedisServerOptions, startRedisServer } from './redis-server'

/**
 * The server matrix: the redis-server-compatible binaries the Redis-facing suites run on, from
 * TOLLGATE_TEST_SERVERS (paths or PATH names, separated by ":"; .ci/run sets it to Debian's
 * redis-server, then newer Redis and Valkey). Unset, the matrix is the `redis-server` on PATH alone,
 * which the shared server of the run (global-setup.ts) already is.
 */
export const TEST_SERVERS_ENV = 'TOLLGATE_TEST_SERVERS'

export interface TestServer {
  /** What the server says it is, for test titles: "redis 7.0.15", "valkey 255.255.255 (valkey-server-unstable-55bbbe0)". */
  readonly name: string
  /** The binary: an absolute path. */
  readonly bin: string
  /** The first server of the matrix: the one the run's shared server is (unless REDIS_URL names another). */
  readonly first: boolean
}

function onPath(name: string): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue
    try {
      accessSync(join(dir, name), fsConstants.X_OK)
      return join(dir, name)
    } catch {
      // not in this PATH entry
    }
  }
  throw new Error(`${name} (from ${TEST_SERVERS_ENV}) is not on PATH`)
}

/** "redis 7.0.15" from `Redis server v=7.0.15 sha=…`; a build of a branch (v=255.255.255) also names its file. */
function nameOf(bin: string): string {
  let version: string
  try {
    version = execFileSync(bin, ['--version'], { encoding: 'utf8', timeout: 5000 })
  } catch (error) {
    throw new Error(`${bin} (from ${TEST_SERVERS_ENV}) did not run: ${(error as Error).message}`)
  }
  const m = /^(\w+) server v=(\S+)/i.exec(version.trim())
  if (m === null) throw new Error(`${bin} --version did not say which server it is: ${JSON.stringify(version.trim())}`)
  const file = basename(bin)
  const plain = file === 'redis-server' || file === 'valkey-server'
  return `${m[1]!.toLowerCase()} ${m[2]}${plain ? '' : ` (${file})`}`
}

let cached: TestServer[] | undefined

/** The servers of the matrix, in TOLLGATE_TEST_SERVERS's order (read once per test file). */
export function testServers(): TestServer[] {
  if (cached !== undefined) return cached
  const list = (process.env[TEST_SERVERS_ENV] ?? '').split(':').filter((s) => s.trim() !== '')
  const bins = (list.length === 0 ? ['redis-server'] : list).map((b) => (b.includes('/') ? b : onPath(b)))
  cached = bins.map((bin, i) => ({ name: nameOf(bin), bin, first: i === 0 }))
  return cached
}

/** Starts a redis-server process of `server`'s binary (see startRedisServer). */
export function startTestServer(server: TestServer, options: Omit<StartRedisServerOptions, 'bin'> = {}): Promise<RedisServer> {
  return startRedisServer({ ...options, bin: server.bin })
}

/**
 * The URL of a server of `server`'s kind for a describe block: the run's shared server for the first
 * server of the matrix (as before the matrix, at no cost), a server of the block's own for the others,
 * started in beforeAll and stopped in afterAll. Call it inside the describe block, before its own hooks:
 * jest runs afterAll hooks in the order they are declared, so the server stops before the block's
 * clients are closed (give an ioredis client `disconnectTimeout: 0`, or its close waits 2 s).
 */
export function serverUrl(server: TestServer): () => string {
  let own: RedisServer | undefined
  beforeAll(async () => {
    if (!server.first) own = await startTestServer(server)
  })
  afterAll(async () => {
    await own?.stop()
  })
  return () => (own === undefined ? redisUrl() : own.url)
}
