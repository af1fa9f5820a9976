import { Limiter, RedisStore, TollgateError } from '@tollgate/core'

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
  it('throws for an object that is not an ioredis client, naming the methods it lacks', () => {
    const error = thrown(() => new RedisStore({ client: { get: async () => null } as never }))
    expect(error?.code).toBe('TG_INVALID_OPTION')
    expect(error?.message).toContain('expected an ioredis Redis or Cluster instance (it has no multi(), del(), defineCommand())')
  })

  it('throws for a node-redis client, saying so', () => {
    // The shape of a node-redis v4/v5 client (createClient): commands and multi(), no defineCommand.
    const nodeRedis = { isOpen: false, sendCommand: async () => null, multi: () => ({}), del: async () => 0, connect: async () => {} }
    const error = thrown(() => new RedisStore({ client: nodeRedis as never }))
    expect(error?.message).toContain(
      'it has no defineCommand(); this looks like a node-redis client, which RedisStore does not support yet',
    )
  })
})
