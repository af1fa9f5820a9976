import { join } from 'node:path'
import type { Decision } from '@tollgate/core'
import { Cluster, type ClusterOptions } from 'ioredis'
import type { RedisClusterType } from 'redis'
import { closeNodeRedis, newNodeRedisCluster, quitClient } from '../harness/redis'
import { type RedisCluster, startRedisCluster } from '../harness/redis-cluster'
import { getFreePort, REDIS_HOST, type RedisServer, startRedisServer } from '../harness/redis-server'
import { sleep } from '../support/time'
import {
  admin,
  bySource,
  clientsInOneSlot,
  clusterLimiter,
  clusterNodes,
  consumeLoop,
  held,
  migrateSlot,
  overMax,
  ownerOf,
  startMigration,
} from './support'

// Slots resharded onto a node that joined the cluster after the client loaded its slot
// map. Plain commands and scripts follow the MOVED there (ioredis connects to the node named in the
// redirect), but a MULTI/EXEC (the fixed window's fast path) came back as EXECABORT, its MOVED only in
// previousErrors: 260 client-windows over max in an earlier run. The store now refreshes the slot
// map and sends the transaction once more, within the same deadline; after an ASK, with ASKING on the
// new node, over a connection from the client's own pool.
const MAX = 5
const WINDOW_MS = 1000

let cluster: RedisCluster
let masterPorts: number[]
const added: RedisServer[] = []
const clients: Cluster[] = []
const nodeRedisClients: RedisClusterType[] = []

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 })
  masterPorts = cluster.nodes.filter((n) => n.role === 'master').map((n) => n.port)
}, 60_000)

afterAll(async () => {
  for (const c of clients) await quitClient(c)
  for (const c of nodeRedisClients) closeNodeRedis(c)
  await Promise.all(added.map((s) => s.stop()))
  await cluster?.stop()
})

/** A client that learns the slot map once and then only from redirects (no periodic refresh during the test). */
async function freshClient(options: ClusterOptions = {}): Promise<Cluster> {
  const c = new Cluster(cluster.startupNodes, { slotsRefreshInterval: 600_000, redisOptions: { maxRetriesPerRequest: 1 }, ...options })
  c.on('error', () => {})
  clients.push(c)
  await c.ping()
  return c
}

/** Starts an empty cluster-enabled redis-server and has it meet the cluster; resolves once every node knows it. */
async function addNode(): Promise<number> {
  const server = await startRedisServer({
    extraArgs: async (port, dir) => {
      let busPort = await getFreePort()
      while (busPort === port) busPort = await getFreePort()
      return [
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        '2000',
        '--cluster-port',
        String(busPort),
      ]
    },
  })
  added.push(server)
  const conn = admin(server.port)
  try {
    const first = cluster.nodes[0]!
    const known = await clusterNodes(first.port)
    const before = known.length
    const bus = known.find((n) => n.port === first.port)!.busPort
    await conn.call('CLUSTER', 'MEET', REDIS_HOST, first.port, bus)
    const ports = [...masterPorts, server.port]
    for (let i = 0; i < 200; i++) {
      const known = await Promise.all(ports.map(async (p) => (await clusterNodes(p)).length))
      const ok = String(await conn.call('CLUSTER', 'INFO')).includes('cluster_state:ok')
      if (ok && known.every((n) => n === before + 1)) return server.port
      await sleep(50)
    }
    throw new Error(`the node on port ${server.port} did not join the cluster (state ok, known to all) within 10 s`)
  } finally {
    conn.disconnect()
  }
}

/**
 * A slot migrating to a node added after `client` loaded its slot map, with the client key's window already
 * moved there: the store keeps deciding from Redis, counting 2, 3, 4 in the new node's key. `moved` runs once
 * the key is on the new node, before the store's next call (what the client itself does there).
 */
async function decidesThroughAskToNewNode(
  client: Cluster | RedisClusterType,
  name: string,
  moved: (at: { newPort: number; slot: number; storeKey: string }) => Promise<void> = async () => {},
): Promise<number> {
  const newPort = await addNode()
  const { slot, keys } = clientsInOneSlot(`reshard-ask-${name.replace(/ /g, '-')}`, 1)
  const clientKey = keys[0]!
  const windowMs = 60_000
  const { limiter, clock, errors, prefix } = clusterLimiter(client, { max: MAX, window: windowMs }, '2s')
  // One window for the whole test, however long it takes.
  clock.now = Math.floor(Date.now() / windowMs) * windowMs + 1000
  const consume = () => limiter.consume(clientKey) as Promise<Decision>
  expect(await consume()).toMatchObject({ source: 'store', count: 1 })
  const storeKey = `${prefix}{${clientKey}}:${Math.floor(clock.now / windowMs)}`

  const from = await ownerOf(masterPorts[0]!, slot)
  await startMigration(slot, from.port, newPort, [storeKey])
  expect(await held(newPort, storeKey, slot, from.port)).toEqual({ target: '1', leftOnSource: 0 })
  await moved({ newPort, slot, storeKey })

  const decisions: Decision[] = []
  for (let n = 0; n < 3; n++) decisions.push(await consume())
  expect(errors).toEqual([])
  expect(decisions.map((d) => [d.source, d.count])).toEqual([
    ['store', 2],
    ['store', 3],
    ['store', 4],
  ])
  expect(await held(newPort, storeKey, slot, from.port)).toEqual({ target: '4', leftOnSource: 0 })
  return newPort
}

describe('a slot migrating to a node the client has not connected to', () => {
  // ioredis follows an ASK for a plain command or a script by connecting to the node it names, but
  // resends a pipeline only through the connections it already has: a MULTI for a key already moved
  // to a new node meets ASK until ioredis gives up, then EXECABORT. The store follows the ASK itself,
  // ASKING and the transaction on the new node, through a connection of the client's own pool.
  it.each([
    ['following redirects itself', {}],
    ['following no redirects itself', { maxRedirections: 0 }],
  ] as const)('keeps deciding from the store through an ioredis Cluster %s, counting in the new node’s key', async (name, options) => {
    const client = await freshClient(options)
    const newPort = await decidesThroughAskToNewNode(client, name, async ({ newPort, slot, storeKey }) => {
      // The client has never connected to the new node, and its own MULTI does not get there.
      expect(client.nodes('all').some((n) => n.options.port === newPort)).toBe(false)
      await expect(client.multi().pttl(storeKey).exec()).rejects.toMatchObject({
        message: expect.stringMatching(/^EXECABORT/),
        previousErrors: [expect.objectContaining({ message: expect.stringMatching(new RegExp(`^ASK ${slot} \\S+:${newPort}$`)) })],
      })
    })
    // Over the client's own connection to the new node, which the client closes when it quits.
    expect(client.nodes('master').some((n) => n.options.port === newPort)).toBe(true)
  })

  // node-redis lists only the nodes that own slots, and a node importing its first slot owns none: the
  // store has the cluster's nodeClient make a client for the node the ASK names.
  it('keeps deciding from the store through a node-redis cluster, counting in the new node’s key', async () => {
    const client = await newNodeRedisCluster(cluster.startupNodes)
    nodeRedisClients.push(client)
    await decidesThroughAskToNewNode(client, 'node-redis')
  })
})

describe('resharding onto a node the client has not connected to', () => {
  it('a MULTI/EXEC refused with EXECABORT by a MOVED to the new node is sent again after a slot-map refresh', async () => {
    // maxRedirections 1: ioredis gives up on the redirect at once and hands back EXECABORT, instead of
    // looping until its own refresh lands (which it does with the default 16, see the test below).
    const options = { maxRedirections: 1 }
    const raw = await freshClient(options)
    const client = await freshClient(options)
    const newPort = await addNode()
    const probe = clientsInOneSlot('reshard-probe', 1)
    const moving = clientsInOneSlot('reshard-quiet', 3, new Set([probe.slot]))
    // A generous deadline: this test is about following the redirect; the one below is about time.
    const { limiter, clock, errors } = clusterLimiter(client, { max: MAX, window: '1 minute' }, '2s')
    const consume = (key: string) => {
      clock.now = Date.now()
      return limiter.consume(key) as Promise<Decision>
    }
    const probeKey = `{${probe.keys[0]}}:probe`
    await raw.multi().set(probeKey, '0', 'PX', '60000', 'NX').incrby(probeKey, '1').exec()
    for (const key of moving.keys) expect((await consume(key)).source).toBe('store')
    for (const slot of [probe.slot, moving.slot]) {
      const from = await ownerOf(masterPorts[0]!, slot)
      await migrateSlot(slot, from.port, newPort, [...masterPorts, newPort])
    }
    // Neither client knows the new node yet; a plain ioredis transaction fails on the redirect.
    for (const c of [raw, client]) expect(c.nodes('all').some((n) => n.options.port === newPort)).toBe(false)
    await expect(raw.multi().set(probeKey, '0', 'PX', '60000', 'NX').incrby(probeKey, '1').exec()).rejects.toMatchObject({
      message: expect.stringMatching(/^EXECABORT/),
      previousErrors: expect.arrayContaining([expect.objectContaining({ message: expect.stringMatching(/^MOVED/) })]),
    })
    const after = await Promise.all(moving.keys.map(consume))
    expect(errors).toEqual([])
    expect(after.map((d) => [d.source, d.remaining])).toEqual(moving.keys.map(() => ['store', MAX - 2]))
  })

  it('no client goes over its max while its slot moves to a new node under load', async () => {
    const client = await freshClient()
    const newPort = await addNode()
    const moving = clientsInOneSlot('reshard-load', 4)
    const others = Array.from({ length: 12 }, (_, i) => `reshard-still-${i}`)
    const { limiter, clock, errors } = clusterLimiter(client, { max: MAX, window: WINDOW_MS })
    const load = consumeLoop(limiter, [...moving.keys, ...others], clock, { concurrency: 2, maxMs: 6000, maxPerClient: 5000, pauseMs: 3 })
    try {
      await sleep(600)
      const from = await ownerOf(masterPorts[0]!, moving.slot)
      await migrateSlot(moving.slot, from.port, newPort, [...masterPorts, newPort], 15)
      await sleep(1200)
    } finally {
      await load.stop()
    }
    const isMoving = (key: string) => moving.keys.includes(key)
    const sources = bySource(load.results, isMoving)
    console.log(
      `reshard onto a new node: moving clients' sources ${JSON.stringify(sources)}, ${errors.length} store errors ${errors.slice(0, 3).join(' | ')}`,
    )
    expect(load.errors).toEqual([])
    expect(overMax(load.results, WINDOW_MS, MAX)).toEqual([])
    // A MOVED redirect (the slot has moved) is followed within the deadline, and so is an ASK (the slot
    // still migrating, the key already moved) with ASKING on the new node: no such EXECABORT reaches
    // the limiter.
    expect(errors.filter((e) => /EXECABORT|MOVED|\bASK\b/.test(e))).toEqual([])
  }, 30_000)
})
