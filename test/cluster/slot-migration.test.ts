import { RedisStore } from '@tollgate/core'
import { Cluster } from 'ioredis'
import type { RedisClusterType } from 'redis'
import { closeNodeRedis, newNodeRedisCluster, quitClient, testPrefix } from '../harness/redis'
import { type RedisCluster, startRedisCluster } from '../harness/redis-cluster'
import { sleep } from '../support/time'
import { ALGORITHM_CASES, bySource, clientsInOneSlot, clusterLimiter, consumeLoop, migrateSlot, overMax, ownerOf } from './support'

// A slot moved (IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE) while requests run. Requests for
// the moving slot meet ASK, TRYAGAIN (a multi-key script whose keys are half moved) and, once it has
// moved, MOVED. Whatever the store answers or the fallback decides, every request counted is a
// request admitted: no client may get more than `max` in any window. Through both clients RedisStore
// accepts: ioredis follows ASK and MOVED itself except for a MULTI whose slot moved; node-redis follows
// them for single commands and never for a MULTI (the store's one retry after a fresh slot map).
const MAX = 5
const WINDOW_MS = 1000

let cluster: RedisCluster
let client: Cluster
let nodeRedis: RedisClusterType
let masterPorts: number[]

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 })
  masterPorts = cluster.nodes.filter((n) => n.role === 'master').map((n) => n.port)
  client = new Cluster(cluster.startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } })
  client.on('error', () => {})
  await client.ping()
  nodeRedis = await newNodeRedisCluster(cluster.startupNodes)
}, 60_000)

afterAll(async () => {
  closeNodeRedis(nodeRedis)
  if (client !== undefined) await quitClient(client)
  await cluster?.stop()
})

describe.each([
  ['ioredis', () => client],
  ['node-redis', () => nodeRedis],
] as const)('a slot migrating under load, through %s', (_client, storeClient) => {
  it.each(ALGORITHM_CASES)(
    '%s: no client goes over its max in any window while its slot moves twice',
    async (name, options) => {
      const moving = clientsInOneSlot(`move-${name}`, 4)
      const others = Array.from({ length: 12 }, (_, i) => `still-${name}-${i}`)
      const { limiter, clock, errors } = clusterLimiter(storeClient(), { ...options, max: MAX, window: WINDOW_MS })
      const load = consumeLoop(limiter, [...moving.keys, ...others], clock, {
        concurrency: 2,
        maxMs: 6000,
        maxPerClient: 5000,
        pauseMs: 3,
      })
      let movedKeys = 0
      try {
        await sleep(600)
        // There and back again: each move meets the keys the load keeps writing.
        for (let move = 0; move < 2; move++) {
          const from = await ownerOf(masterPorts[0]!, moving.slot)
          const to = masterPorts.find((p) => p !== from.port)!
          movedKeys += await migrateSlot(moving.slot, from.port, to, masterPorts, 15)
          await sleep(700)
        }
      } finally {
        await load.stop()
      }
      const isMoving = (key: string) => moving.keys.includes(key)
      const sources = { moving: bySource(load.results, isMoving), others: bySource(load.results, (k) => !isMoving(k)) }
      // Figures for the report: how the moving clients' decisions were taken, and the errors seen.
      console.log(
        `${name}: ${load.results.length} decisions, ${movedKeys} keys migrated, sources ${JSON.stringify(sources)}, ` +
          `${errors.length} store errors${errors.length > 0 ? ` (first: ${errors[0]})` : ''}`,
      )
      expect(load.errors).toEqual([])
      expect(movedKeys).toBeGreaterThan(0)
      expect(overMax(load.results, WINDOW_MS, MAX)).toEqual([])
      // Clients of other slots were never refused a store decision because of the moving one.
      expect(sources.others.store ?? 0).toBeGreaterThan(0)
    },
    30_000,
  )
})

describe.each([
  ['ioredis', () => client],
  ['node-redis', () => nodeRedis],
] as const)('a slot that moved, through %s', (clientName, storeClient) => {
  it("sends a MULTI refused with MOVED once more, on a fresh slot map, and names the key's new master", async () => {
    const { slot, keys } = clientsInOneSlot(`moved-${clientName}`, 1)
    const key = `${testPrefix('moved')}{${keys[0]}}`
    const store = new RedisStore({ client: storeClient(), timeout: '2s', batch: false })
    const now = Date.now()
    expect(await store.increment(key, 1, 60_000, now)).toBe(1) // the client has the slot map now
    const from = await ownerOf(masterPorts[0]!, slot)
    const to = masterPorts.find((p) => p !== from.port)!
    expect(await migrateSlot(slot, from.port, to, masterPorts)).toBe(1)
    // The client still sends this slot's MULTI to its old master, which answers MOVED.
    expect(store.nodeOf(key)).toBe(`127.0.0.1:${from.port}`)
    expect(await store.increment(key, 1, 60_000, now)).toBe(2)
    expect(store.nodeOf(key)).toBe(`127.0.0.1:${to}`)
  })
})

describe('what a reshard moves after script-algorithm traffic', () => {
  // The record that keeps a resent call from counting twice lives in the limit's own keys, so moving a
  // slot moves each client's limit keys and nothing else: at most two per client key (a window
  // algorithm's current and previous window), where a record key per call made it dozens.
  const CLIENTS = 20
  it.each([['sliding-window'], ['gcra'], ['sliding-log'], ['concurrency']] as const)(
    '%s: at most 2 keys per client key move with the slot',
    async (algorithm) => {
      const { slot, keys } = clientsInOneSlot(`reshard-${algorithm}`, CLIENTS)
      const { limiter, clock } = clusterLimiter(client, { algorithm, max: 100_000, window: WINDOW_MS }, '2s')
      // Traffic over more than two windows, so the window algorithms have made a third window's keys.
      const load = consumeLoop(limiter, keys, clock, { concurrency: 2, maxMs: 2500, maxPerClient: 100_000, pauseMs: 2 })
      await sleep(2500)
      await load.stop()
      expect(load.errors).toEqual([])
      expect(bySource(load.results).store).toBe(load.results.length)
      const from = await ownerOf(masterPorts[0]!, slot)
      const to = masterPorts.find((p) => p !== from.port)!
      const moved = await migrateSlot(slot, from.port, to, masterPorts)
      console.log(`${algorithm}: ${load.results.length} decisions for ${CLIENTS} client keys; the reshard moved ${moved} keys`)
      expect(moved).toBeGreaterThanOrEqual(CLIENTS)
      expect(moved).toBeLessThanOrEqual(2 * CLIENTS)
    },
    20_000,
  )
})
