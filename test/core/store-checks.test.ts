import { Limiter, RedisStore, TollgateError } from '@tollgate/core'
import { createClient, createCluster } from 'redis'

// A store, or a client, that cannot serve the limiter fails where it is built, naming what it lacks:
// never accepted, then routed to the fallback at every request and logged as "the store failed".

function thrown(build: () => unknown): TollgateError | undefined {
  try {
    build()
  } catch (error) {
    return error as TollgateError
  }
  return undefined
}

const protocol = {
  local: false,
  admit: async () => ({ allowed: true, values: [0, 1] }),
  refund: async () => {},
  forget: async () => {},
}

describe('new Limiter({ store })', () => {
  it.each([
    ['admit', 'admit()'],
    ['refund', 'refund()'],
    ['forget', 'forget()'],
    ['local', 'a boolean "local"'],
  ] as const)('throws when the store has no %s, naming it', (missing, named) => {
    const store = { ...protocol } as Record<string, unknown>
    delete store[missing]
    for (const algorithm of ['fixed-window', 'gcra'] as const) {
      const error = thrown(() => new Limiter({ store: store as never, algorithm }))
      expect(error).toBeInstanceOf(TollgateError)
      expect(error?.code).toBe('TG_INVALID_OPTION')
      expect(error?.message).toContain('Invalid option "store"')
      expect(error?.message).toContain(`this one lacks ${named}`)
      expect(error?.message).toContain(`"${algorithm}"`)
    }
  })

  it('throws for a store written for the old increment-only protocol, naming every missing method', () => {
    const old = { local: true, increment: () => 1, get: () => 0, reset: () => {} }
    expect(thrown(() => new Limiter({ store: old as never }))?.message).toContain('this one lacks admit(), refund(), forget()')
  })

  it('accepts a store with the whole protocol and no increment (the fast path is optional)', async () => {
    const limiter = new Limiter({ store: protocol, max: 5 })
    const decision = await limiter.consume('k')
    expect(decision).toMatchObject({ allowed: true, source: 'store' })
  })
})

describe('new RedisStore({ client })', () => {
  const SUPPORTED =
    'expected an ioredis Redis or Cluster, or a node-redis client or cluster (createClient() or createCluster() of the "redis" package)'

  it.each([
    ['an empty object', {}, '{} (object)'],
    ['an object with only get()', { get: async () => null }, '{} (object)'],
    // The shape of a node-postgres Client: a connected database client, but not Redis.
    [
      'a pg client',
      { database: 'app', connect: async () => {}, query: async () => ({ rows: [] }), end: async () => {} },
      '{"database":"app"} (object)',
    ],
    ['a string', 'redis://localhost:6379', '"redis://localhost:6379" (string)'],
  ])('refuses %s, naming the supported clients', (_name, client, got) => {
    const error = thrown(() => new RedisStore({ client: client as never }))
    expect(error).toBeInstanceOf(TollgateError)
    expect(error?.code).toBe('TG_INVALID_OPTION')
    expect(error?.message).toBe(`Invalid option "client": ${SUPPORTED}, got ${got} [TG_INVALID_OPTION]`)
  })

  it('names what an almost-ioredis object lacks', () => {
    const error = thrown(() => new RedisStore({ client: { multi: () => ({}), del: async () => 0 } as never }))
    expect(error?.message).toContain(`${SUPPORTED} (it has no defineCommand())`)
  })

  it.each([
    ['client', () => createClient({ url: 'redis://127.0.0.1:1' })],
    ['cluster', () => createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] })],
  ])('accepts a node-redis %s, and building the store sends nothing (it stays unconnected)', (_kind, make) => {
    const client = make()
    const store = new RedisStore({ client })
    expect(store.local).toBe(false)
    expect(client.isOpen).toBe(false)
  })
})
