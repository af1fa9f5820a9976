import { type AlgorithmName, type Decision, Limiter, type LimiterOptions, MemoryStore, type Store } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { testClock } from '../support/time'

// A `blockDuration` lockout is part of what a client has: `reset` ends it (in the store, and in every
// cache of the limiter's process), and `peek` reports it as the refusal `consume` would give.

const db = useRedis()

const MINUTE = 60_000
const START = 1_800_000_000_000 + 5_000 // 5 s into a minute
const quiet = { warn() {}, error() {} }
// The fixed window counts on the batched INCRBY path with the over-limit cache; GCRA through its script.
const algorithms: AlgorithmName[] = ['fixed-window', 'gcra']

/** What a caller reads from a decision: everything but the key and the source. */
function answer(d: Decision) {
  return { allowed: d.allowed, remaining: d.remaining, count: d.count, resetAt: d.resetAt, retryAfterMs: d.retryAfterMs, limit: d.limit }
}

describe.each(db.stores())('reset and peek of a lockout on the %s store', (name, makeStore) => {
  function lockoutLimiter(algorithm: AlgorithmName, options: LimiterOptions = {}) {
    const clock = testClock(START)
    const prefix = testPrefix(`lockout-reset-${algorithm}`)
    const store = makeStore()
    const make = () =>
      new Limiter({ algorithm, max: 3, window: '1m', blockDuration: '15m', store, prefix, clock: clock.read, logger: quiet, ...options })
    /** The block key in Redis, or undefined on the memory store. */
    const blockKey = name === 'Redis' ? `${prefix}{alice}:block` : undefined
    return { limiter: make(), another: make, clock, blockKey, store }
  }

  async function lockOut(limiter: Limiter): Promise<Decision> {
    for (let i = 0; i < 3; i++) expect((await limiter.consume('alice')).allowed).toBe(true)
    return limiter.consume('alice')
  }

  it.each(algorithms)('%s: peek reports the block with the time left on it, as consume refuses, counting nothing', async (algorithm) => {
    const { limiter, another, clock } = lockoutLimiter(algorithm)
    expect(answer(await lockOut(limiter))).toMatchObject({ allowed: false, resetAt: START + 15 * MINUTE, retryAfterMs: 15 * MINUTE })
    clock.now += 2 * MINUTE // the window has moved on: only the block refuses
    const limited: Decision[] = []
    limiter.on('limited', (d) => limited.push(d))
    const peeked = await limiter.peek('alice')
    expect(answer(peeked)).toEqual({
      allowed: false,
      remaining: 0,
      count: 3,
      resetAt: START + 15 * MINUTE,
      retryAfterMs: 13 * MINUTE,
      limit: 3,
    })
    expect(limited).toEqual([]) // peek emits nothing
    // Another limiter on the store (another process) knows the block only from the store.
    expect(answer(await another().peek('alice'))).toEqual(answer(peeked))
    expect(answer(await limiter.consume('alice'))).toEqual(answer(peeked))
    expect((await limiter.peek('bob')).allowed).toBe(true)
  })

  it.each(algorithms)('%s: reset ends the block, so the client is admitted again at once', async (algorithm) => {
    const { limiter, another, clock, blockKey } = lockoutLimiter(algorithm)
    await lockOut(limiter)
    clock.now += 2 * MINUTE
    if (blockKey !== undefined) expect(await db.client.exists(blockKey)).toBe(1)
    await limiter.reset('alice')
    if (blockKey !== undefined) expect(await db.client.exists(blockKey)).toBe(0)
    expect(answer(await limiter.peek('alice'))).toMatchObject({ allowed: true, remaining: 3, retryAfterMs: 0 })
    expect(answer(await another().peek('alice'))).toMatchObject({ allowed: true, remaining: 3 })
    expect((await limiter.consume('alice')).allowed).toBe(true)
    expect((await another().consume('alice')).allowed).toBe(true)
  })

  it.each(algorithms)('%s: reset in the window of the refusal forgets the count that started the block', async (algorithm) => {
    const { limiter, blockKey } = lockoutLimiter(algorithm)
    await lockOut(limiter)
    expect((await limiter.consume('alice')).allowed).toBe(false)
    await limiter.reset('alice')
    const after = [] as boolean[]
    for (let i = 0; i < 4; i++) after.push((await limiter.consume('alice')).allowed)
    // A full quota again, and the next refusal starts a new block of the full length.
    expect(after).toEqual([true, true, true, false])
    expect(await limiter.peek('alice')).toMatchObject({ allowed: false, retryAfterMs: 15 * MINUTE })
    if (blockKey !== undefined) expect(await db.client.pttl(blockKey)).toBeGreaterThan(14 * MINUTE)
  })

  it('a reset in another process ends the block here within a second; until then a flood costs one read a second', async () => {
    const { limiter, another, clock, store } = lockoutLimiter('fixed-window')
    await lockOut(limiter) // this process set the block, and knows it
    const reads = jest.spyOn(store, 'blockedUntil')
    const flood: boolean[] = []
    for (let i = 0; i < 20; i++, clock.now += 100) flood.push((await limiter.consume('alice')).allowed)
    expect(flood).toEqual(Array(20).fill(false))
    expect(reads).toHaveBeenCalledTimes(1)
    await another().reset('alice')
    clock.now += 1000
    expect(await limiter.peek('alice')).toMatchObject({ allowed: true, remaining: 3 })
    expect((await limiter.consume('alice')).allowed).toBe(true)
  })

  it('reset of a client under no block leaves other clients blocked', async () => {
    const { limiter, clock } = lockoutLimiter('fixed-window')
    await lockOut(limiter)
    clock.now += MINUTE
    await limiter.reset('bob')
    expect(await limiter.peek('alice')).toMatchObject({ allowed: false, retryAfterMs: 14 * MINUTE })
    expect((await limiter.consume('alice')).allowed).toBe(false)
  })
})

describe('a store of its own', () => {
  /** The protocol's required members only, on a MemoryStore: counts in the store, blocks in the limiter's process. */
  function countsOnly(): Store {
    const memory = new MemoryStore({ sweepIntervalMs: 0 })
    return { local: true, admit: (c) => memory.admit(c), refund: (c) => memory.refund(c), forget: (c) => memory.forget(c) }
  }

  it('without block(): reset ends the block the limiter keeps, and peek reports it', () => {
    const clock = testClock(START)
    const limiter = new Limiter({ max: 1, window: '1m', blockDuration: '15m', store: countsOnly(), clock: clock.read, logger: quiet })
    limiter.consume('alice')
    expect(limiter.consume('alice')).toMatchObject({ allowed: false })
    clock.now += 5 * MINUTE
    expect(limiter.peek('alice')).toMatchObject({ allowed: false, retryAfterMs: 10 * MINUTE })
    limiter.reset('alice')
    expect(limiter.peek('alice')).toMatchObject({ allowed: true })
    expect(limiter.consume('alice')).toMatchObject({ allowed: true })
  })

  it('keeps a block the store failed to take for its whole length, in the process that set it', async () => {
    const memory = new MemoryStore({ sweepIntervalMs: 0 })
    const store: Store = {
      ...countsOnly(),
      blockedUntil: (key, now) => memory.blockedUntil(key, now),
      block: () => Promise.reject(new Error('READONLY')),
      unblock: (key) => memory.unblock(key),
    }
    const clock = testClock(START)
    const limiter = new Limiter({ max: 1, window: '1s', blockDuration: '15m', store, clock: clock.read, logger: quiet })
    const errors: unknown[] = []
    limiter.on('storeError', (e) => errors.push(e))
    await limiter.consume('alice')
    expect(await limiter.consume('alice')).toMatchObject({ allowed: false })
    await new Promise((resolve) => setImmediate(resolve)) // the write's failure arrives
    expect(errors).toEqual([new Error('READONLY')])
    clock.now += 5 * MINUTE // many windows later, and many rechecks
    expect(await limiter.consume('alice')).toMatchObject({ allowed: false, retryAfterMs: 10 * MINUTE })
    expect(await limiter.peek('alice')).toMatchObject({ allowed: false, retryAfterMs: 10 * MINUTE })
  })

  it('with block() but no unblock(): keeps working, and the limiter warns that reset cannot end its blocks', () => {
    const memory = new MemoryStore({ sweepIntervalMs: 0 })
    const store: Store = {
      ...countsOnly(),
      blockedUntil: (key, now) => memory.blockedUntil(key, now),
      block: (key, until) => memory.block(key, until),
    }
    const warnings: string[] = []
    const logger = { warn: (m: string) => void warnings.push(m), error() {} }
    const limiter = new Limiter({ max: 1, window: '1m', blockDuration: '15m', store, clock: () => START, logger })
    expect(warnings).toEqual([expect.stringContaining('has no unblock()')])
    limiter.consume('alice')
    expect(limiter.consume('alice')).toMatchObject({ allowed: false })
    expect(limiter.reset('alice')).toBeUndefined()
    expect(limiter.peek('alice')).toMatchObject({ allowed: false, retryAfterMs: 15 * MINUTE })
    new Limiter({ max: 1, store, prefix: 'other:', logger }) // no blockDuration: no warning
    expect(warnings).toHaveLength(1)
  })
})
