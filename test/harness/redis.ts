import { randomUUID } from 'node:crypto'
import { Cluster, Redis, type RedisOptions } from 'ioredis'
import { createClient, createCluster, type RedisClientType, type RedisClusterType } from 'redis'

/**
 * Set by global-setup.ts in jest's main process before workers start; jest copies the main
 * process's environment into every worker and every test file's sandboxed `process.env`.
 */
export const TEST_REDIS_URL_ENV = 'TOLLGATE_TEST_REDIS_URL'

/** URL of the Redis server shared by the whole jest run (a spawned one, or REDIS_URL). */
export function redisUrl(): string {
  const url = process.env[TEST_REDIS_URL_ENV]
  if (url === undefined || url === '') {
    throw new Error(
      `${TEST_REDIS_URL_ENV} is not set, so jest's globalSetup (test/harness/global-setup.ts) did not run: ` +
        'run the tests with the root jest config (cd to the repo root, then npx jest)',
    )
  }
  return url
}

/**
 * An ioredis client for the shared server. The URL is read when this is called, not when the module
 * is imported, so calling it from `beforeAll` is always safe. Commands fail after one retry instead of
 * ioredis' default 20, so a broken server fails a test quickly rather than at the jest timeout.
 * Pass `{ lazyConnect: true }` to open no socket until the first command.
 */
export function newRedisClient(options: RedisOptions = {}): Redis {
  return new Redis(redisUrl(), { maxRetriesPerRequest: 1, connectTimeout: 2000, ...options })
}

/**
 * Closes a client whatever its state, for `afterAll`. `quit()` alone can hang on a client whose server
 * a test killed (it waits to reconnect), and throws on one that never connected. Quit clients before
 * stopping the server they use: one left reconnecting to a dead server holds ioredis' 2 s disconnect
 * timer, which jest reports as "did not exit one second after the test run".
 */
export async function quitClient(client: Redis | Cluster): Promise<void> {
  if (client.status === 'end') return
  if (client.status !== 'ready') {
    client.disconnect()
    return
  }
  try {
    await client.quit()
  } catch {
    client.disconnect()
  }
}

/**
 * A connected node-redis (the `redis` package) client for `url` (default: the shared server), as an app
 * makes one: `createClient`, an 'error' listener (node-redis throws an 'error' event nobody listens
 * to), `await connect()`. Its defaults otherwise: offline queue on (unless `disableOfflineQueue`: then a
 * command sent while disconnected is refused at once), reconnecting with backoff.
 */
export async function newNodeRedisClient(url = redisUrl(), options: { disableOfflineQueue?: boolean } = {}): Promise<RedisClientType> {
  const client = createClient({ url, ...options, socket: { connectTimeout: 2000 } }) as RedisClientType
  client.on('error', () => {})
  await client.connect()
  return client
}

/** A connected node-redis Cluster over `rootNodes`, with an 'error' listener (see newNodeRedisClient). */
export async function newNodeRedisCluster(rootNodes: ReadonlyArray<{ host: string; port: number }>): Promise<RedisClusterType> {
  const cluster = createCluster({
    rootNodes: rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
    defaults: { socket: { connectTimeout: 2000 } },
  }) as RedisClusterType
  cluster.on('error', () => {})
  cluster.on('node-error', () => {})
  await cluster.connect()
  return cluster
}

/** Closes a node-redis client or Cluster whatever its state (destroy: no waiting for replies of a dead server). */
export function closeNodeRedis(client: RedisClientType | RedisClusterType | undefined): void {
  if (client?.isOpen) client.destroy()
}

const PREFIX_NAME = /^[A-Za-z0-9._/-]+$/

/**
 * A key prefix no other test file or run uses, e.g. `tgtest:redis-store:1a2b3c4d:`, so files can
 * share one server without FLUSHALL. `name` is for humans reading `redis-cli --scan`; it may not hold
 * glob characters (it is scanned with `prefix*`) or braces (which would pin keys to one cluster slot).
 */
export function testPrefix(name?: string): string {
  const id = randomUUID().slice(0, 8)
  if (name === undefined) return `tgtest:${id}:`
  if (!PREFIX_NAME.test(name)) {
    throw new Error(`Invalid testPrefix name: expected letters, digits, ".", "_", "/" or "-", got ${JSON.stringify(name)}`)
  }
  return `tgtest:${name}:${id}:`
}

/** Escapes `*?[]\` so a literal prefix can be used in a SCAN MATCH pattern. */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&')
}

async function scanNode(node: Redis, pattern: string, found: Set<string>): Promise<void> {
  let cursor = '0'
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
    // SCAN may return a key more than once; the Set removes duplicates.
    for (const key of keys) found.add(key)
    cursor = next
  } while (cursor !== '0')
}

/**
 * Keys matching `pattern`, found with SCAN (KEYS blocks a server other workers share). On a Cluster
 * client every master is scanned, since each holds only its own slots.
 */
export async function scanKeys(client: Redis | Cluster, pattern: string): Promise<string[]> {
  const found = new Set<string>()
  if (client instanceof Cluster) {
    const masters = client.nodes('master')
    if (masters.length === 0) {
      throw new Error(
        `scanKeys: the Cluster client knows no master yet (status ${client.status}); run a command first so it loads the slot map`,
      )
    }
    await Promise.all(masters.map((node) => scanNode(node, pattern, found)))
  } else {
    await scanNode(client, pattern, found)
  }
  return [...found].sort()
}

/** Keys under `prefix` that would live forever (PTTL -1): every key a store writes must expire. */
export async function keysWithoutTtl(client: Redis | Cluster, prefix: string): Promise<string[]> {
  const keys = await scanKeys(client, `${escapeGlob(prefix)}*`)
  const ttls = await Promise.all(keys.map((key) => client.pttl(key)))
  // -2 means the key expired between SCAN and PTTL, which is fine.
  return keys.filter((_, i) => ttls[i] === -1)
}
