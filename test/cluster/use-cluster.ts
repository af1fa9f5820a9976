import { Cluster } from 'ioredis'
import type { RedisClusterType } from 'redis'
import { closeNodeRedis, newNodeRedisCluster } from '../harness/redis'
import { type RedisCluster, startRedisCluster } from '../harness/redis-cluster'

/** A test file's local Redis Cluster and its clients, from `useCluster()`. */
export interface FileCluster {
  /** The ioredis Cluster client; read it inside a test or hook, once `beforeAll` has connected it. */
  readonly client: Cluster
  /** The same cluster through node-redis (createCluster). */
  readonly nodeRedis: RedisClusterType
  /** Both clients RedisStore accepts, for `describe.each`. */
  readonly clients: ReadonlyArray<readonly [string, () => Cluster | RedisClusterType]>
  /** Every key under `prefix`, from every master, sorted. */
  keysUnder(prefix: string): Promise<string[]>
  /** Seeds for a client of another library or major: every node of the cluster. */
  readonly startupNodes: ReadonlyArray<{ host: string; port: number }>
}

/**
 * A real local Redis Cluster of three masters (redis-server processes on free ports) for one test file:
 * started, with an ioredis and a node-redis client connected, in `beforeAll`; stopped in `afterAll`.
 */
export function useCluster(): FileCluster {
  let cluster: RedisCluster | undefined
  let client: Cluster | undefined
  let nodeRedis: RedisClusterType | undefined
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 })
    client = new Cluster(cluster.startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } })
    await client.ping()
    nodeRedis = await newNodeRedisCluster(cluster.startupNodes)
  }, 60_000)
  afterAll(async () => {
    closeNodeRedis(nodeRedis)
    client?.disconnect()
    await cluster?.stop()
  })
  const connected = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useCluster: the clients are connected in beforeAll; read them inside a test or hook')
    return value
  }
  const file: FileCluster = {
    get client() {
      return connected(client)
    },
    get nodeRedis() {
      return connected(nodeRedis)
    },
    clients: [
      ['ioredis', () => file.client],
      ['node-redis', () => file.nodeRedis],
    ],
    get startupNodes() {
      return connected(cluster).startupNodes
    },
    async keysUnder(prefix) {
      const all = await Promise.all(file.client.nodes('master').map((node) => node.keys(`${prefix}*`)))
      return all.flat().sort()
    },
  }
  return file
}
