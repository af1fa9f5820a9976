import { MemoryStore, RedisStore, type Store } from '@tollgate/core'
import type { Redis } from 'ioredis'
import type { RedisClientType } from 'redis'
import { closeNodeRedis, newNodeRedisClient, newRedisClient, quitClient } from './redis'

/** A test file's clients of the shared server, from `useRedis()`. */
export interface FileRedis {
  /** The file's ioredis client; read it inside a test or hook, once `beforeAll` has connected it. */
  readonly client: Redis
  /** The same server through node-redis (the `redis` package), with `useRedis({ nodeRedis: true })`. */
  readonly nodeRedis: RedisClientType
  /**
   * The stores a limiter test runs on, for `describe.each`: the memory store (without a sweep timer
   * unless `memory` makes another) and a Redis store on `client`, each factory making a fresh store.
   */
  stores(memory?: () => Store): Array<[string, () => Store]>
}

/**
 * The shared server's clients for one test file: connected (and answering PING) in `beforeAll`, quit in
 * `afterAll`. Call it at the top of the file or of a `describe`; every Redis-facing test file opens its
 * clients this way, so one place decides how they are made and closed.
 */
export function useRedis(options: { nodeRedis?: boolean } = {}): FileRedis {
  let client: Redis | undefined
  let nodeRedis: RedisClientType | undefined
  beforeAll(async () => {
    client = newRedisClient()
    await client.ping()
    if (options.nodeRedis === true) nodeRedis = await newNodeRedisClient()
  })
  afterAll(async () => {
    closeNodeRedis(nodeRedis)
    if (client !== undefined) await quitClient(client)
  })
  const file: FileRedis = {
    get client() {
      if (client === undefined) throw new Error('useRedis: the client is connected in beforeAll; read it inside a test or hook')
      return client
    },
    get nodeRedis() {
      if (nodeRedis === undefined) throw new Error('useRedis: pass { nodeRedis: true } and read it inside a test or hook')
      return nodeRedis
    },
    stores: (memory = () => new MemoryStore({ sweepIntervalMs: 0 })) => [
      ['memory', memory],
      ['Redis', () => new RedisStore({ client: file.client, timeout: '2s' })],
    ],
  }
  return file
}
