import { MemoryStore, RedisStore, type RedisStoreOptions, TollgateError } from '@tollgate/core'
import { Cluster, Redis } from 'ioredis'
import { createClient as createClient6, createCluster as createCluster6 } from 'redis6'

// Store options are checked when the store is built, with the same error shape as the limiter's:
// the option, the bad value and what was expected, plus a stable code.

/** What a constructor threw (or undefined), so a missing throw fails the assertions below. */
function thrown(build: () => unknown): TollgateError | undefined {
  try {
    const built = build()
    if (built instanceof MemoryStore) built.shutdown()
  } catch (error) {
    return error as TollgateError
  }
  return undefined
}

function expectInvalid(error: TollgateError | undefined, option: string, got: string): void {
  expect(error).toBeInstanceOf(TollgateError)
  expect(error?.code).toBe('TG_INVALID_OPTION')
  expect(error?.message).toContain(`Invalid option "${option}": expected `)
  expect(error?.message).toContain(`, got ${got} [TG_INVALID_OPTION]`)
}

/** The known options an unknown-option error lists, so the tables below can be checked for gaps. */
function knownOptions(build: () => unknown): string[] {
  const error = thrown(build)
  expect(error?.code).toBe('TG_UNKNOWN_OPTION')
  return /known options: ([^[]+) \[/.exec(error?.message ?? '')![1]!.split(', ')
}

describe('MemoryStore options', () => {
  // [option, bad value, how the value appears in the message]
  const bad: Array<[string, unknown, string]> = [
    ['clock', 5, '5 (number)'],
    ['clock', 'Date.now', '"Date.now" (string)'],
    ['clock', null, 'null'],
    ['clock', {}, '{} (object)'],
    ['sweepIntervalMs', -1, '-1 (number)'],
    ['sweepIntervalMs', 1.5, '1.5 (number)'],
    ['sweepIntervalMs', Number.NaN, 'NaN (number)'],
    ['sweepIntervalMs', Number.POSITIVE_INFINITY, 'Infinity (number)'],
    // Node would run a timer this long every millisecond instead.
    ['sweepIntervalMs', 2 ** 31, '2147483648 (number)'],
    ['sweepIntervalMs', '5s', '"5s" (string)'],
    ['sweepIntervalMs', null, 'null'],
    ['sweepIntervalMs', false, 'false (boolean)'],
    ['maxKeys', 0, '0 (number)'],
    ['maxKeys', 1.5, '1.5 (number)'],
    ['maxKeys', '1e6', '"1e6" (string)'],
    ['maxKeys', null, 'null'],
    ['logger', null, 'null'],
    ['logger', {}, '{} (object)'],
    ['logger', 'console', '"console" (string)'],
  ]

  it.each(bad)('rejects %s = %p, naming the option and the value', (option, value, got) => {
    expectInvalid(
      thrown(() => new MemoryStore({ [option]: value } as never)),
      option,
      got,
    )
  })

  it('rejects a clock that is not a function at construction, not later from the sweep timer', () => {
    expectInvalid(
      thrown(() => new MemoryStore({ clock: 5, sweepIntervalMs: 100 } as never)),
      'clock',
      '5 (number)',
    )
  })

  it.each([
    ['sweepIntervalMS', 5000],
    ['sweep', 5000],
    ['now', () => 0],
  ])('rejects the unknown option %s, listing the known ones', (option, value) => {
    const error = thrown(() => new MemoryStore({ [option]: value } as never))
    expect(error).toBeInstanceOf(TollgateError)
    expect(error?.code).toBe('TG_UNKNOWN_OPTION')
    expect(error?.message).toBe(
      `Unknown MemoryStore option "${option}"; known options: sweepIntervalMs, clock, maxKeys, logger [TG_UNKNOWN_OPTION]`,
    )
  })

  it.each([
    [null, 'null'],
    ['fast', '"fast" (string)'],
    [[], 'an array of 0 (array)'],
  ])('rejects %p in place of the options object', (options, got) => {
    const error = thrown(() => new MemoryStore(options as never))
    expect(error?.code).toBe('TG_INVALID_OPTION')
    expect(error?.message).toBe(`Invalid MemoryStore options: expected an object like { sweepIntervalMs }, got ${got} [TG_INVALID_OPTION]`)
  })

  it('has a bad-value case for every option it knows', () => {
    expect(knownOptions(() => new MemoryStore({ nope: 1 } as never)).sort()).toEqual([...new Set(bad.map(([o]) => o))].sort())
  })

  it.each([
    ['no options', undefined],
    ['an empty object', {}],
    ['undefined values (the defaults)', { sweepIntervalMs: undefined, clock: undefined }],
    ['the sweep turned off', { sweepIntervalMs: 0 }],
    ['a clock and the longest sweep interval', { clock: () => 0, sweepIntervalMs: 2 ** 31 - 1 }],
  ])('accepts %s', (_name, options) => {
    const store = new MemoryStore(options)
    store.shutdown()
    expect(store.local).toBe(true)
  })

  it('leaves the caller’s options object as it was', () => {
    const options = Object.freeze({ sweepIntervalMs: 0 })
    new MemoryStore(options).shutdown()
    expect(options).toEqual({ sweepIntervalMs: 0 })
  })
})

describe('RedisStore options', () => {
  // A real ioredis client that never connects: lazyConnect opens no socket until a command is sent,
  // and building a RedisStore sends none (it only defines its scripts on the client).
  let client: Redis
  beforeAll(() => {
    client = new Redis({ lazyConnect: true, port: 1, maxRetriesPerRequest: 0 })
  })
  afterAll(() => client.disconnect())

  // [option, bad value, how the value appears in the message]; the client is filled in for the others.
  const bad: Array<[string, unknown, string]> = [
    ['client', undefined, 'undefined (undefined)'],
    ['client', null, 'null'],
    ['client', 'redis://localhost:6379', '"redis://localhost:6379" (string)'],
    ['client', {}, '{} (object)'],
    ['client', { get: 1 }, '{"get":1} (object)'],
    ['timeout', -5, '-5 (number)'],
    ['timeout', 0, '0 (number)'],
    ['timeout', 1.5, '1.5 (number)'],
    ['timeout', '', '"" (string)'],
    ['timeout', '1 fortnight', '"1 fortnight" (string)'],
    ['timeout', true, 'true (boolean)'],
    ['timeout', null, 'null'],
    ['batch', 'yes', '"yes" (string)'],
    ['batch', 1, '1 (number)'],
    ['batch', null, 'null'],
    ['transport', 'fast', '"fast" (string)'],
    ['transport', true, 'true (boolean)'],
  ]

  it.each(bad)('rejects %s = %p, naming the option and the value', (option, value, got) => {
    const options = option === 'client' ? { client: value } : { client, [option]: value }
    expectInvalid(
      thrown(() => new RedisStore(options as never)),
      option,
      got,
    )
  })

  it.each([
    ['timeoutMs', 50],
    ['redis', {}],
    ['Batch', true],
  ])('rejects the unknown option %s, listing the known ones', (option, value) => {
    const error = thrown(() => new RedisStore({ client, [option]: value } as never))
    expect(error).toBeInstanceOf(TollgateError)
    expect(error?.code).toBe('TG_UNKNOWN_OPTION')
    expect(error?.message).toBe(
      `Unknown RedisStore option "${option}"; known options: client, timeout, batch, transport [TG_UNKNOWN_OPTION]`,
    )
  })

  it.each([
    [undefined, 'undefined (undefined)'],
    [null, 'null'],
    ['redis://localhost:6379', '"redis://localhost:6379" (string)'],
  ])('rejects %p in place of the options object', (options, got) => {
    const error = thrown(() => new RedisStore(options as never))
    expect(error?.code).toBe('TG_INVALID_OPTION')
    expect(error?.message).toBe(`Invalid RedisStore options: expected an object like { client }, got ${got} [TG_INVALID_OPTION]`)
  })

  it('has a bad-value case for every option it knows', () => {
    expect(knownOptions(() => new RedisStore({ client, nope: 1 } as never)).sort()).toEqual([...new Set(bad.map(([o]) => o))].sort())
  })

  const valid: Array<[string, Omit<RedisStoreOptions, 'client'>, number]> = [
    ['only a client', {}, 50],
    ['a duration string timeout and batching off', { timeout: '2s', batch: false }, 2000],
    ['a timeout in ms and batching on', { timeout: 100, batch: true }, 100],
    ['undefined values (the defaults)', { timeout: undefined, batch: undefined, transport: undefined }, 50],
    ['the transport through the client', { transport: 'client' }, 50],
    ['the direct transport', { transport: 'direct' }, 50],
    ['the transport on its own connection', { transport: 'own-connection' }, 50],
  ]
  it.each(valid)('accepts %s', (_name, options, timeoutMs) => {
    const store = new RedisStore({ client, ...options })
    expect(store.timeoutMs).toBe(timeoutMs)
    // Building the store sent nothing: the lazy client never tried to connect.
    expect(client.status).toBe('wait')
  })

  it('refuses a node-redis 6 client with keyPrefix, naming client and keyPrefix', () => {
    const prefixed = createClient6({ keyPrefix: 'app:' })
    const cluster = createCluster6({ rootNodes: [{ url: 'redis://127.0.0.1:1' }], keyPrefix: 'app:' } as never)
    for (const client of [prefixed, cluster]) {
      const error = thrown(() => new RedisStore({ client: client as never }))
      expect(error?.code).toBe('TG_INVALID_OPTION')
      expect(error?.message).toMatch(/Invalid option "client": expected a node-redis client without keyPrefix .*prefix: "app:"/)
    }
  })

  it.each(['direct', 'own-connection'] as const)('refuses transport "%s" with a Cluster client, naming both', (transport) => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true })
    try {
      const error = thrown(() => new RedisStore({ client: cluster, transport }))
      expect(error?.code).toBe('TG_INVALID_OPTION')
      expect(error?.message).toContain(`transport "${transport}" needs a standalone ioredis client`)
      expect(error?.message).toContain('the client given is an ioredis Cluster')
    } finally {
      cluster.disconnect()
    }
  })
})
