import { readFileSync } from 'node:fs'
import { RedisStore } from '@tollgate/core'
import { limitSpec, storeCall, storeContract } from '@tollgate/core/testing'
import { Redis as IORedis6 } from 'ioredis6'
import { createClient as createClient4 } from 'redis4'
import { createClient as createClient6 } from 'redis6'
import { escapeGlob, redisUrl, scanKeys, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// The store contract on each supported major of the clients beside the ones the rest of the suite uses
// (ioredis 5, node-redis 5): ioredis 6 (every transport) and node-redis 4 and 6, each pinned in the root
// package.json under an alias. The contract's own checks read the keys through the file's ioredis 5 client.
const db = useRedis()

type Closable = { disconnect?(): void; destroy?(): void; isOpen?: boolean }
const opened: Closable[] = []
afterAll(() => {
  for (const c of opened) {
    if (c.destroy !== undefined) {
      if (c.isOpen) c.destroy()
    } else c.disconnect?.()
  }
})

let ioredis6: IORedis6
// node-redis's own types differ per major; the store takes any of them (NodeRedisClientLike).
let nodeRedis4: never
let nodeRedis6: never
beforeAll(async () => {
  ioredis6 = new IORedis6(redisUrl(), { maxRetriesPerRequest: 1, connectTimeout: 2000 })
  opened.push(ioredis6)
  await ioredis6.ping()
  for (const [create, set] of [
    [createClient4, (c: never) => (nodeRedis4 = c)],
    [createClient6, (c: never) => (nodeRedis6 = c)],
  ] as const) {
    const client = (create as (options: object) => { on(e: string, l: () => void): void; connect(): Promise<unknown> })({
      url: redisUrl(),
      socket: { connectTimeout: 2000 },
    })
    client.on('error', () => {})
    opened.push(client as Closable)
    await client.connect()
    set(client as never)
  }
})

/** The major of the package an alias resolves to: the contract proves nothing of a major it does not run on. */
function installedMajor(alias: string): number {
  const manifest = JSON.parse(readFileSync(require.resolve(`${alias}/package.json`), 'utf8')) as { version: string }
  return Number(manifest.version.split('.')[0])
}

/**
 * Two calls of cost 1 against a max of 1 through `store`, then the keys under `prefix` as the file's own
 * client reads them: the verdicts and a key on the test server show the store counted through its client.
 */
async function countedThrough(store: RedisStore, prefix: string): Promise<{ verdicts: boolean[]; keys: string[] }> {
  // One time for both calls, so they fall in one window whatever the clock does between them.
  const now = Date.now()
  const call = () => storeCall('fixed-window', `${prefix}{c}`, [limitSpec(1, 60_000)], 1, now)
  const verdicts = [(await store.admit(call())).allowed, (await store.admit(call())).allowed]
  return { verdicts, keys: await scanKeys(db.client, `${escapeGlob(prefix)}*`) }
}

describe.each(['client', 'direct', 'own-connection'] as const)('ioredis 6, transport %s', (transport) => {
  storeContract(
    'Redis through ioredis 6',
    () => ({ store: new RedisStore({ client: ioredis6, transport, timeout: '2s' }), prefix: testPrefix(`contract-ioredis6-${transport}`) }),
    { redis: () => db.client },
  )

  it('runs on ioredis 6, counting through it on the test server', async () => {
    expect(installedMajor('ioredis6')).toBe(6)
    const prefix = testPrefix(`majors-ioredis6-${transport}`)
    const { verdicts, keys } = await countedThrough(new RedisStore({ client: ioredis6, transport, timeout: '2s' }), prefix)
    expect(verdicts).toEqual([true, false])
    expect(keys).toHaveLength(1)
  })
})

describe('node-redis 4 and 6', () => {
  it.each([
    ['redis4', 4, () => nodeRedis4],
    ['redis6', 6, () => nodeRedis6],
  ] as const)('runs on %s (node-redis %d), counting through it on the test server', async (alias, major, client) => {
    expect(installedMajor(alias)).toBe(major)
    const prefix = testPrefix(`majors-node-${alias}`)
    const { verdicts, keys } = await countedThrough(new RedisStore({ client: client(), timeout: '2s' }), prefix)
    expect(verdicts).toEqual([true, false])
    expect(keys).toHaveLength(1)
  })

  storeContract(
    'Redis through node-redis 4',
    () => ({ store: new RedisStore({ client: nodeRedis4, timeout: '2s' }), prefix: testPrefix('contract-node-redis4') }),
    { redis: () => db.client },
  )
  storeContract(
    'Redis through node-redis 6',
    () => ({ store: new RedisStore({ client: nodeRedis6, timeout: '2s' }), prefix: testPrefix('contract-node-redis6') }),
    { redis: () => db.client },
  )
})
