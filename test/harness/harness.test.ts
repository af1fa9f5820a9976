import { existsSync } from 'node:fs'
import { createServer } from 'node:net'
import { Cluster, Redis } from 'ioredis'
import globalSetup from './global-setup'
import { keysWithoutTtl, newRedisClient, quitClient, redisUrl, scanKeys, TEST_REDIS_URL_ENV, testPrefix } from './redis'
import { type RedisCluster, startRedisCluster } from './redis-cluster'
import { getFreePort, type RedisServer, startRedisServer } from './redis-server'

const clients: Array<Redis | Cluster> = []

function track<T extends Redis | Cluster>(client: T): T {
  clients.push(client)
  return client
}

// Clients are quit before the server they talk to is stopped: a client left reconnecting to a dead
// server holds ioredis' 2 s disconnect timer, which keeps jest from exiting promptly.
async function quitTrackedClients(): Promise<void> {
  await Promise.all(clients.splice(0).map(quitClient))
}

afterAll(quitTrackedClients)

function canListenOn(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer()
    probe.once('error', () => resolve(false))
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)))
  })
}

describe('startRedisServer', () => {
  let server: RedisServer

  beforeAll(async () => {
    server = await startRedisServer()
  })

  afterAll(async () => {
    await quitTrackedClients()
    await server.stop()
  })

  it('answers PING on 127.0.0.1 at the port in its url', async () => {
    expect(server.host).toBe('127.0.0.1')
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`)
    const client = track(new Redis(server.url, { maxRetriesPerRequest: 1 }))
    await expect(client.ping()).resolves.toBe('PONG')
  })

  it('comes back empty on the same port after kill() and restart(), and an open client reconnects', async () => {
    const client = track(new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 }))
    client.on('error', () => {}) // connection errors are the point of this test
    await client.set('restart-probe', '1')
    const oldPid = server.pid

    await server.kill()
    expect(server.running).toBe(false)
    await server.restart()

    expect(server.running).toBe(true)
    expect(server.pid).not.toBe(oldPid)
    await expect(client.ping()).resolves.toBe('PONG')
    await expect(client.get('restart-probe')).resolves.toBeNull()
  })

  it('stops answering while frozen and answers again once thawed', async () => {
    const client = track(new Redis(server.url, { maxRetriesPerRequest: 0, commandTimeout: 300 }))
    await expect(client.ping()).resolves.toBe('PONG')

    server.freeze()
    try {
      await expect(client.ping()).rejects.toThrow(/timed out/i)
    } finally {
      server.thaw()
    }
    await expect(client.ping()).resolves.toBe('PONG')
  })
})

describe('a server after stop()', () => {
  it('has exited, released its port and removed its temp dir', async () => {
    const server = await startRedisServer()
    await server.stop()
    expect(server.running).toBe(false)
    expect(existsSync(server.dir)).toBe(false)
    await expect(canListenOn(server.port)).resolves.toBe(true)
    await expect(server.restart()).rejects.toThrow(/stop\(\) was already called/)
  })
})

describe('without redis-server on PATH', () => {
  it('startRedisServer fails telling how to install it or to set REDIS_URL', async () => {
    const path = process.env.PATH
    process.env.PATH = '/nonexistent-tollgate-path'
    try {
      await expect(startRedisServer()).rejects.toThrow(/apt-get install redis-server.*REDIS_URL/)
    } finally {
      process.env.PATH = path
    }
  })
})

describe('global setup', () => {
  it('hands the shared server URL to the test worker, and that server answers', async () => {
    expect(redisUrl()).toBe(process.env[TEST_REDIS_URL_ENV])
    expect(redisUrl()).toMatch(/^rediss?:\/\//)
    const client = track(newRedisClient())
    await expect(client.ping()).resolves.toBe('PONG')
  })

  it('rejects an unreachable REDIS_URL with a message naming it', async () => {
    const port = await getFreePort()
    const saved = { redis: process.env.REDIS_URL, test: process.env[TEST_REDIS_URL_ENV] }
    process.env.REDIS_URL = `redis://:hunter2@127.0.0.1:${port}`
    try {
      const failure = globalSetup()
      await expect(failure).rejects.toThrow(`REDIS_URL=redis://:***@127.0.0.1:${port}`)
      await expect(failure).rejects.toThrow(/did not answer PING within 3 s/)
      expect(process.env[TEST_REDIS_URL_ENV]).toBe(saved.test)
    } finally {
      if (saved.redis === undefined) delete process.env.REDIS_URL
      else process.env.REDIS_URL = saved.redis
    }
  })
})

describe('key helpers on the shared server', () => {
  it('give every call a distinct prefix and reject names that would break SCAN or cluster slots', () => {
    expect(testPrefix('harness')).toMatch(/^tgtest:harness:[0-9a-f]{8}:$/)
    expect(testPrefix('harness')).not.toBe(testPrefix('harness'))
    expect(testPrefix()).toMatch(/^tgtest:[0-9a-f]{8}:$/)
    expect(() => testPrefix('a*b')).toThrow(/Invalid testPrefix name/)
    expect(() => testPrefix('{user}')).toThrow(/Invalid testPrefix name/)
  })

  it('find keys under a prefix with SCAN and report only those without a TTL', async () => {
    const client = track(newRedisClient())
    const prefix = testPrefix('harness')
    await client.set(`${prefix}forever`, '1')
    await client.set(`${prefix}expiring`, '1', 'PX', 60000)
    await client.set(`${testPrefix('harness')}other-file`, '1', 'PX', 60000)

    await expect(scanKeys(client, `${prefix}*`)).resolves.toEqual([`${prefix}expiring`, `${prefix}forever`])
    await expect(keysWithoutTtl(client, prefix)).resolves.toEqual([`${prefix}forever`])
    await client.del(`${prefix}forever`)
  })
})

describe('startRedisCluster with 3 masters', () => {
  let cluster: RedisCluster
  let client: Cluster

  beforeAll(async () => {
    cluster = await startRedisCluster()
    client = track(new Cluster(cluster.startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } }))
  })

  afterAll(async () => {
    await quitTrackedClients()
    await cluster.stop()
  })

  it('forms a cluster whose nodes all report every slot assigned', async () => {
    expect(cluster.nodes.map((n) => n.role)).toEqual(['master', 'master', 'master'])
    expect(cluster.servers.map((s) => s.port)).toEqual(cluster.nodes.map((n) => n.port))
    const info = String(await client.call('CLUSTER', 'INFO'))
    expect(info).toContain('cluster_state:ok')
    expect(info).toContain('cluster_slots_assigned:16384')
  })

  it('lets an ioredis Cluster client SET and GET keys that live in different slots', async () => {
    const prefix = testPrefix('cluster')
    const keys = ['a', 'b', 'c', 'd', 'e', 'f'].map((k) => `${prefix}${k}`)
    const slots = await Promise.all(keys.map(async (k) => Number(await client.call('CLUSTER', 'KEYSLOT', k))))
    expect(new Set(slots).size).toBeGreaterThan(1)

    await Promise.all(keys.map((k) => client.set(k, k, 'PX', 60000)))
    await expect(Promise.all(keys.map((k) => client.get(k)))).resolves.toEqual(keys)
    await expect(scanKeys(client, `${prefix}*`)).resolves.toEqual([...keys].sort())
  })

  it('puts {user1}:a and {user1}:b in the same slot', async () => {
    const slotA = await client.call('CLUSTER', 'KEYSLOT', '{user1}:a')
    const slotB = await client.call('CLUSTER', 'KEYSLOT', '{user1}:b')
    expect(slotA).toBe(slotB)
    expect(await client.call('CLUSTER', 'KEYSLOT', 'user1:a')).not.toBe(slotA)
  })
})

describe('startRedisCluster with a replica per master', () => {
  it('forms with every replica attached and in sync before it resolves', async () => {
    const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 })
    try {
      const roles = cluster.nodes.map((n) => n.role)
      expect(roles.filter((r) => r === 'master')).toHaveLength(3)
      expect(roles.filter((r) => r === 'replica')).toHaveLength(3)
      const replica = cluster.nodes[roles.indexOf('replica')]
      const client = new Redis({ host: replica?.host, port: replica?.port, maxRetriesPerRequest: 1 })
      try {
        await expect(client.info('replication')).resolves.toContain('master_link_status:up')
      } finally {
        await quitClient(client)
      }
    } finally {
      await cluster.stop()
    }
  })
})
