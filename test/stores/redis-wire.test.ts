import { tracingChannel } from 'node:diagnostics_channel'
import { readFileSync } from 'node:fs'
import { RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'
import { type RedisServer, startRedisServer } from '../harness/redis-server'
import { startTlsRedisServer, type TlsRedisServer } from '../harness/redis-tls'

// With `transport: 'own-connection'` on a standalone ioredis client, the store sends the fixed window's
// transactions on a connection of its own (packages/core/src/stores/redis/own-connection.ts), named `tollgate`. These tests find that connection
// in Redis's CLIENT LIST and read what it sent with MONITOR, on a private server, so they see the
// wire, not the code that wrote it.

let redis: RedisServer
let admin: Redis

beforeAll(async () => {
  redis = await startRedisServer()
  admin = new Redis(redis.url)
  await admin.ping()
})
// Each test starts with no own connection left from the one before (a disconnected client's closes
// a moment later).
afterEach(async () => {
  await ownUntil((found) => found.length === 0)
})
afterAll(async () => {
  admin.disconnect()
  await redis.stop()
})

interface Connection {
  id: string
  addr: string
  name: string
  db: string
  user: string
}

async function connections(): Promise<Connection[]> {
  const list = (await admin.client('LIST')) as string
  return list
    .trim()
    .split('\n')
    .map((line) => Object.fromEntries(line.split(' ').map((field) => field.split('=', 2) as [string, string])) as unknown as Connection)
}

/** The store's own connections, by CLIENT LIST. */
async function own(): Promise<Connection[]> {
  return (await connections()).filter((c) => c.name === 'tollgate')
}

/** Waits (bounded) until `test` holds of the store's own connections; returns them. */
async function ownUntil(test: (found: Connection[]) => boolean, ms = 5000): Promise<Connection[]> {
  const until = Date.now() + ms
  for (;;) {
    const found = await own()
    if (test(found)) return found
    if (Date.now() > until) throw new Error(`own connections still ${JSON.stringify(found)} after ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Every command Redis ran while `run` ran, with the address and db it came from (MONITOR). */
async function monitored(run: () => Promise<unknown>): Promise<Array<{ args: string[]; source: string; database: number }>> {
  const monitor = await admin.monitor() // a connection of its own
  const seen: Array<{ args: string[]; source: string; database: number }> = []
  monitor.on('monitor', (_time: string, args: string[], source: string, database: string) => {
    seen.push({ args, source, database: Number(database) })
  })
  try {
    await run()
    await admin.ping() // MONITOR shows commands in the order Redis ran them: this one comes after run's
    await new Promise((resolve) => setTimeout(resolve, 20))
  } finally {
    monitor.disconnect()
  }
  return seen.filter((c) => ['multi', 'incrby', 'pexpire', 'exec'].includes(c.args[0]!.toLowerCase()))
}

describe("RedisStore's own connection", () => {
  it("carries the fixed window's transactions, in the client's db, under its keyPrefix, with exact counts and TTLs", async () => {
    const client = new Redis(redis.url, { db: 2, keyPrefix: 'app:' })
    try {
      const store = new RedisStore({ client, timeout: '2s', transport: 'own-connection' })
      const [wire] = await ownUntil((found) => found.length === 1)
      expect(wire!.db).toBe('2')
      const now = Date.now()
      let counts: number[] = []
      const sent = await monitored(async () => {
        counts = await Promise.all(['a', 'b', 'a', 'c', 'a'].map((k) => store.increment(`wire{${k}}`, 2, 60_000, now)))
      })
      expect(counts).toEqual([2, 2, 4, 2, 6])
      // One transaction, every command of it from the store's own connection, none from the client's.
      expect(sent.map((c) => c.args[0]!.toLowerCase())).toEqual([
        'multi',
        'incrby',
        'pexpire',
        'incrby',
        'pexpire',
        'incrby',
        'pexpire',
        'exec',
      ])
      expect(new Set(sent.map((c) => c.source))).toEqual(new Set([wire!.addr]))
      expect(new Set(sent.map((c) => c.database))).toEqual(new Set([2]))
      const window = Math.floor(now / 60_000)
      const db2 = admin.duplicate({ db: 2 })
      try {
        expect(await db2.get(`app:wire{a}:${window}`)).toBe('6')
        for (const k of ['a', 'b', 'c']) {
          const ttl = await db2.pttl(`app:wire{${k}}:${window}`)
          expect(ttl > 0 && ttl <= 61_000).toBe(true)
        }
        expect(await db2.exists(`wire{a}:${window}`)).toBe(0)
      } finally {
        db2.disconnect()
      }
    } finally {
      client.disconnect()
    }
  })

  it('is one per client, however many stores share it, and none with another transport', async () => {
    const shared = new Redis(redis.url)
    const apart = new Redis(redis.url)
    try {
      const stores = [
        new RedisStore({ client: shared, transport: 'own-connection' }),
        new RedisStore({ client: shared, transport: 'own-connection' }),
        new RedisStore({ client: apart }),
      ]
      await ownUntil((found) => found.length === 1)
      await Promise.all(stores.map((store, i) => store.increment(`one-per-client{${i}}`, 1, 60_000, Date.now())))
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(await own()).toHaveLength(1)
    } finally {
      shared.disconnect()
      apart.disconnect()
    }
  })

  it("authenticates as the client's ACL user, and names the refused command when Redis discards the transaction", async () => {
    const user = `wire-${process.pid}`
    await admin.call('ACL', 'SETUSER', user, 'on', '>s3cret', '~*', '+@all', '-pexpire')
    const limited = new Redis(redis.url, { username: user, password: 's3cret' })
    try {
      const store = new RedisStore({ client: limited, timeout: '2s', transport: 'own-connection' })
      const [wire] = await ownUntil((found) => found.length === 1)
      expect(wire!.user).toBe(user)
      const now = Date.now()
      await expect(store.increment('refused{c}', 1, 60_000, now)).rejects.toMatchObject({
        code: 'TG_STORE_ERROR',
        message: expect.stringMatching(/NOPERM.*pexpire.*EXECABORT/is),
      })
      expect(await admin.exists(`refused{c}:${Math.floor(now / 60_000)}`)).toBe(0)
    } finally {
      limited.disconnect()
      await admin.call('ACL', 'DELUSER', user)
    }
  })

  it('stays closed when its AUTH is refused, and the client keeps counting', async () => {
    const user = `wire-nopass-${process.pid}`
    await admin.call('ACL', 'SETUSER', user, 'on', '>right', '~*', '+@all')
    const client = new Redis(redis.url, { username: user, password: 'right' })
    try {
      await client.ping()
      // The password changes after the client authenticated: its connection stays in, a new one is refused.
      await admin.call('ACL', 'SETUSER', user, 'resetpass', '>changed')
      const before = (await connections()).length
      const store = new RedisStore({ client, timeout: '2s', transport: 'own-connection' })
      const now = Date.now()
      for (let i = 1; i <= 5; i++) {
        expect(await store.increment('auth-refused{c}', 1, 60_000, now)).toBe(i)
        await new Promise((resolve) => setTimeout(resolve, 250))
      }
      expect(await own()).toEqual([])
      // The refused connection was closed, not left open unauthenticated, and not tried again meanwhile.
      expect((await connections()).length).toBe(before)
      const failures = ((await admin.call('ACL', 'LOG')) as unknown[][]).map((entry) => {
        const fields = new Map<unknown, unknown>()
        for (let i = 0; i < entry.length; i += 2) fields.set(entry[i], entry[i + 1])
        return fields
      })
      const refusedAuth = failures.filter((f) => f.get('username') === user && f.get('reason') === 'auth')
      expect(refusedAuth.map((f) => Number(f.get('count')))).toEqual([1]) // one AUTH tried in 1.25 s (a retry would come after 0.5 s)
    } finally {
      client.disconnect()
      await admin.call('ACL', 'DELUSER', user)
    }
  })

  it('fails the transactions in flight at once when it is killed, then the client carries them until it is back', async () => {
    const client = new Redis(redis.url)
    try {
      const store = new RedisStore({ client, timeout: '5s', transport: 'own-connection' })
      const [wire] = await ownUntil((found) => found.length === 1)
      const now = Date.now()
      await admin.call('CLIENT', 'PAUSE', '3000', 'WRITE') // EXEC waits; CLIENT KILL does not
      const pending = store.increment('killed{c}', 1, 60_000, now)
      const failed = pending.then(
        () => undefined,
        (error: unknown) => error,
      )
      await new Promise((resolve) => setTimeout(resolve, 50))
      const t = performance.now()
      await admin.client('KILL', 'ID', wire!.id)
      const error = await failed
      expect(performance.now() - t).toBeLessThan(1000) // not the 5 s deadline
      expect(error).toMatchObject({ code: 'TG_STORE_ERROR', message: expect.stringMatching(/connection closed/) })
      await admin.call('CLIENT', 'UNPAUSE')
      // Meanwhile the client's own connection counts.
      expect(await store.increment('killed{d}', 1, 60_000, now)).toBe(1)
      const [back] = await ownUntil((found) => found.length === 1 && found[0]!.id !== wire!.id)
      expect(back!.id).not.toBe(wire!.id)
      expect(await store.increment('killed{d}', 1, 60_000, now)).toBe(2)
    } finally {
      await admin.call('CLIENT', 'UNPAUSE')
      client.disconnect()
    }
  })

  it('opens again once the client is ready after Redis restarts, and counts on it', async () => {
    const client = new Redis(redis.url, { retryStrategy: () => 50 })
    client.on('error', () => {}) // the restart below is expected
    try {
      const store = new RedisStore({ client, timeout: '2s', transport: 'own-connection' })
      const [before] = await ownUntil((found) => found.length === 1)
      await redis.kill('SIGKILL')
      await redis.restart() // empty
      const [after] = await ownUntil((found) => found.length === 1, 10_000)
      expect(after!.id).not.toBe(before!.id)
      const now = Date.now()
      let count = 0
      const sent = await monitored(async () => {
        count = await store.increment('restarted{c}', 5, 60_000, now)
      })
      expect(count).toBe(5)
      expect(new Set(sent.map((c) => c.source))).toEqual(new Set([after!.addr]))
    } finally {
      client.disconnect()
    }
  })

  it('closes with the client (quit), so it never outlives it', async () => {
    const client = new Redis(redis.url)
    const store = new RedisStore({ client, transport: 'own-connection' })
    await ownUntil((found) => found.length === 1)
    expect(await store.increment('quit{c}', 1, 60_000, Date.now())).toBe(1)
    await client.quit()
    await ownUntil((found) => found.length === 0)
  })

  it("steps aside when the client selects another db, so every command of the store stays in the client's db", async () => {
    const client = new Redis(redis.url)
    try {
      const store = new RedisStore({ client, timeout: '2s', transport: 'own-connection' })
      await ownUntil((found) => found.length === 1)
      await client.select(5)
      const now = Date.now()
      expect(await store.increment('selected{c}', 4, 60_000, now)).toBe(4)
      const db5 = admin.duplicate({ db: 5 })
      try {
        expect(await db5.get(`selected{c}:${Math.floor(now / 60_000)}`)).toBe('4')
      } finally {
        db5.disconnect()
      }
      expect(await admin.exists(`selected{c}:${Math.floor(now / 60_000)}`)).toBe(0)
    } finally {
      client.disconnect()
    }
  })

  it("steps aside while a tracer listens to ioredis's commands, so the tracer sees every one", async () => {
    const client = new Redis(redis.url)
    const traced = tracingChannel('ioredis:command')
    const names: string[] = []
    const handlers = {
      start: (context: object) => void names.push(String((context as { command?: unknown }).command).toLowerCase()),
      end: () => {},
      asyncStart: () => {},
      asyncEnd: () => {},
      error: () => {},
    }
    try {
      const store = new RedisStore({ client, timeout: '2s', transport: 'own-connection' })
      await ownUntil((found) => found.length === 1)
      traced.subscribe(handlers)
      await store.increment('traced{c}', 1, 60_000, Date.now())
      expect(names).toEqual(expect.arrayContaining(['incrby', 'pexpire']))
    } finally {
      traced.unsubscribe(handlers)
      client.disconnect()
    }
  })
})

describe('on a TLS client', () => {
  let server: TlsRedisServer
  beforeAll(async () => {
    server = await startTlsRedisServer('localhost')
  })
  afterAll(async () => {
    await server?.stop()
  })

  it("opens its connection with the client's TLS options (plain TCP to that port would never be ready)", async () => {
    const tls = { ca: readFileSync(server.certFile), servername: 'localhost', checkServerIdentity: () => undefined }
    const client = new Redis({ host: '127.0.0.1', port: server.tlsPort, tls })
    const tlsAdmin = new Redis(server.redis.url)
    try {
      const store = new RedisStore({ client, timeout: '2s', transport: 'own-connection' })
      const named = async () => ((await tlsAdmin.client('LIST')) as string).split('\n').filter((line) => line.includes(' name=tollgate '))
      const until = Date.now() + 5000
      while ((await named()).length === 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
      expect(await named()).toHaveLength(1)
      const now = Date.now()
      expect(await store.increment('tls{c}', 3, 60_000, now)).toBe(3)
      expect(await tlsAdmin.get(`tls{c}:${Math.floor(now / 60_000)}`)).toBe('3')
    } finally {
      client.disconnect()
      tlsAdmin.disconnect()
    }
  })
})
