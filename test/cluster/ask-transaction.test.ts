import type { Decision } from '@tollgate/core'
import { Cluster } from 'ioredis'
import type { RedisClusterType } from 'redis'
import { closeNodeRedis, newNodeRedisCluster, quitClient } from '../harness/redis'
import { type RedisCluster, startRedisCluster } from '../harness/redis-cluster'
import { clientsInOneSlot, clusterLimiter, held, ownerOf, startMigration } from './support'

// A slot stuck mid-migration (IMPORTING on the target, MIGRATING on the source, as a reshard that
// stopped half way leaves it), with the client's key already moved to the target. The source answers
// every command for that key with ASK; a MULTI meets ASK on each queued command and EXECABORT. ioredis
// follows that itself (it resends the pipeline with ASKING before MULTI) unless it is told to follow
// no redirects; node-redis never does for a MULTI. Where the client leaves it, the store follows the
// ASK: ASKING, then the transaction, on the node the ASK names. The decisions stay the store's,
// counted in the target's key.
const MAX = 5
const WINDOW_MS = 60_000

let cluster: RedisCluster
let client: Cluster
/** An ioredis Cluster that follows no redirect itself: whatever it meets reaches the store. */
let noRedirects: Cluster
let nodeRedis: RedisClusterType
/** Slots already left mid-migration by a test: each test takes a slot of its own. */
const usedSlots = new Set<number>()
let masterPorts: number[]

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 })
  masterPorts = cluster.nodes.filter((n) => n.role === 'master').map((n) => n.port)
  client = new Cluster(cluster.startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } })
  client.on('error', () => {})
  await client.ping()
  noRedirects = new Cluster(cluster.startupNodes, { maxRedirections: 0, redisOptions: { maxRetriesPerRequest: 1 } })
  noRedirects.on('error', () => {})
  await noRedirects.ping()
  nodeRedis = await newNodeRedisCluster(cluster.startupNodes)
}, 60_000)

afterAll(async () => {
  closeNodeRedis(nodeRedis)
  if (client !== undefined) await quitClient(client)
  if (noRedirects !== undefined) await quitClient(noRedirects)
  await cluster?.stop()
})

describe.each([
  ['ioredis', () => client],
  ['ioredis following no redirects itself', () => noRedirects],
  ['node-redis', () => nodeRedis],
] as const)('a slot stuck mid-migration, through %s', (clientName, storeClient) => {
  it('keeps deciding from the store for a key already moved, counting in the target’s key', async () => {
    const { slot, keys } = clientsInOneSlot(`ask-${clientName.replace(/ /g, '-')}`, 1, usedSlots)
    usedSlots.add(slot)
    const clientKey = keys[0]!
    const { limiter, clock, errors, prefix } = clusterLimiter(storeClient(), { max: MAX, window: WINDOW_MS }, '2s')
    clock.now = Math.floor(Date.now() / WINDOW_MS) * WINDOW_MS + 1000
    const first = (await limiter.consume(clientKey)) as Decision
    expect([first.source, first.count]).toEqual(['store', 1])
    const storeKey = `${prefix}{${clientKey}}:${Math.floor(clock.now / WINDOW_MS)}`

    const from = await ownerOf(masterPorts[0]!, slot)
    const to = masterPorts.find((p) => p !== from.port)!
    await startMigration(slot, from.port, to, [storeKey])
    expect(await held(to, storeKey, slot, from.port)).toEqual({ target: '1', leftOnSource: 0 })

    const decisions: Decision[] = []
    for (let n = 0; n < MAX + 1; n++) decisions.push((await limiter.consume(clientKey)) as Decision)
    expect(errors).toEqual([])
    expect(decisions.map((d) => [d.source, d.count, d.allowed])).toEqual([
      ['store', 2, true],
      ['store', 3, true],
      ['store', 4, true],
      ['store', 5, true],
      ['store', 6, false],
      ['cache', 7, false],
    ])
    expect(await held(to, storeKey, slot, from.port)).toEqual({ target: '6', leftOnSource: 0 })
  })
})
