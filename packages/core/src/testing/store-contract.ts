import assert from 'node:assert/strict'
import { allFeatures } from '../features'
import { register } from '../registry'
import type { AlgorithmName, LimitSpec, Store, StoreCall } from '../types'
import {
  admit,
  type ContractRedis,
  type ContractRunner,
  type ContractStore,
  HOUR,
  hashTag,
  keysUnder,
  keysWithoutTtl,
  MINUTE,
  SECOND,
  windowStart,
} from './contract-support'
import { memoryAgreementContract } from './memory-agreement'
import { blockContract, incrementContract, settleContract } from './optional-contracts'
import { limitSpec, storeCall } from './store-calls'

export type { ContractRedis, ContractRunner, ContractStore }

/*
 * The store contract: the behaviour every `Store` must have, for every algorithm, written once and run
 * against each store (Tollgate's own memory and Redis stores, and yours). It speaks only the public
 * protocol (`admit`, `refund`, `forget`, the optional `increment` and block members), with
 * `MemoryStore` as the reference the other stores must agree with.
 *
 * It asserts with node:assert and takes `describe`/`it` from the caller, so it runs under any runner
 * that has those two (jest, vitest, mocha, node:test) and @tollgate/core depends on none of them.
 */

export interface StoreContractOptions {
  /** The store has the optional `increment` fast path of the single-limit fixed window. @default true */
  increment?: boolean
  /** The store keeps `blockDuration` blocks: `blockedUntil`, `block` and `unblock`. @default true */
  blocks?: boolean
  /**
   * The store settles calls to their actual cost (`settle`). `false` skips those cases; unset, they
   * run when the store has `settle()`, so a store written before it passes without it.
   * @default true when the store has settle()
   */
  settle?: boolean
  /** Compare a sequence of answers with a MemoryStore's (off for the MemoryStore itself). @default true */
  sameAsMemory?: boolean
  /**
   * The algorithms the store counts; a store that counts fewer than all five should refuse the others
   * with an error, so a limiter configured with one of them fails loudly.
   * @default ['fixed-window', 'sliding-window', 'gcra', 'sliding-log', 'concurrency']
   */
  algorithms?: readonly AlgorithmName[]
  /** The Redis client (ioredis) the store writes through: adds the key checks (every key has a TTL, one hash tag per call). */
  redis?: () => ContractRedis
  /** `describe` and `it` of your test runner. @default the global `describe` and `it` (jest, vitest with globals, mocha) */
  runner?: ContractRunner
}

const ALL_ALGORITHMS: readonly AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log', 'concurrency']

function globalRunner(): ContractRunner {
  const g = globalThis as { describe?: ContractRunner['describe']; it?: ContractRunner['it'] }
  if (typeof g.describe !== 'function' || typeof g.it !== 'function') {
    throw new TypeError(
      "storeContract: no global describe/it; pass your runner's: storeContract(name, make, { runner: { describe, it } }) (e.g. from 'node:test')",
    )
  }
  return { describe: g.describe, it: g.it }
}

/**
 * Declares the contract's cases for one store, inside the caller's test file:
 *
 *   storeContract('my store', () => ({ store: new MyStore(), prefix: `t:${randomUUID()}:` }), {
 *     increment: false,    // it has no increment() fast path
 *     blocks: false,       // it has no blockedUntil()/block()/unblock(): blockDuration stays in the limiter's process
 *     redis: () => client, // it writes through this ioredis client: check TTLs and hash tags too
 *   })
 *
 * `make` runs once per case, after the caller's setup hooks; it returns a fresh store and a key prefix
 * that no other case uses. Calls carry their own time (`now`), so nothing here sleeps.
 */
export function storeContract(name: string, make: () => ContractStore, options: StoreContractOptions = {}): void {
  // The memory twins the agreement cases compare with decide every algorithm.
  register(...allFeatures)
  const { describe, it } = options.runner ?? globalRunner()
  const algorithms = options.algorithms ?? ALL_ALGORITHMS
  describe(`${name} store contract`, () => {
    if (options.increment !== false) incrementContract({ describe, it }, make)
    if (options.blocks !== false) blockContract(it, make, options.redis)
    for (const algorithm of algorithms) describe(algorithm, () => algorithmContract(it, algorithm, make, options))
  })
}

function algorithmContract(it: ContractRunner['it'], algorithm: AlgorithmName, make: () => ContractStore, options: StoreContractOptions) {
  // A concurrency slot is held or free: the limiter refuses actualCost with it, and its settle moves nothing.
  if (options.settle !== false && algorithm !== 'concurrency') settleContract(it, algorithm, make, options.settle, options.redis)
  const one = limitSpec(5, MINUTE, 5, '1m')
  // Two limits, distinct windows and labels: 3 per 10 s and 5 per hour.
  const short = limitSpec(3, 10 * SECOND, 3, '10s')
  const long = limitSpec(5, HOUR, 5, '1h')
  const call = (storeKey: string, limits: LimitSpec[], cost: number, now: number) => storeCall(algorithm, storeKey, limits, cost, now)

  /** Admits calls of `cost` one after another until one is refused: the number admitted. */
  async function admitUntilRefused(store: Store, storeKey: string, limits: LimitSpec[], now: number, cost = 1): Promise<number> {
    for (let n = 0; n < 100; n++) if (!(await admit(store, call(storeKey, limits, cost, now))).allowed) return n
    throw new assert.AssertionError({ message: '100 calls admitted in a row' })
  }
  /** The numbers a read (cost 0) answers: they change when, and only when, something is counted. */
  const read = async (store: Store, storeKey: string, limits: LimitSpec[], now: number) => [
    ...(await admit(store, call(storeKey, limits, 0, now))).values,
  ]

  it('admits calls of cost 1 up to max, two numbers per limit in each answer, then refuses', async () => {
    const { store, prefix } = make()
    const now = windowStart(MINUTE) + SECOND
    const answers: boolean[] = []
    for (let i = 0; i < 7; i++) answers.push((await admit(store, call(`${prefix}{c}`, [one], 1, now))).allowed)
    assert.deepEqual(answers, [true, true, true, true, true, false, false])
    const both = await admit(store, call(`${prefix}{d}`, [short, long], 1, now))
    assert.deepEqual([both.allowed, both.values.length], [true, 4])
  })

  it('counts nothing for a call of cost 0', async () => {
    const { store, prefix } = make()
    const key = `${prefix}{c}`
    const now = windowStart(MINUTE) + SECOND
    const fresh = await read(store, key, [one], now)
    for (let i = 0; i < 3; i++) await admit(store, call(key, [one], 0, now))
    assert.deepEqual(await read(store, key, [one], now), fresh)
    assert.equal((await admit(store, call(key, [one], 1, now))).allowed, true)
    assert.notDeepEqual(await read(store, key, [one], now), fresh, 'a counted call shows in the numbers')
    assert.equal(await admitUntilRefused(store, key, [one], now), 4)
  })

  it('refuses a call costing more than max and counts none of it', async () => {
    const { store, prefix } = make()
    const now = windowStart(MINUTE) + SECOND
    assert.equal((await admit(store, call(`${prefix}{c}`, [one], 6, now))).allowed, false)
    assert.equal(await admitUntilRefused(store, `${prefix}{c}`, [one], now), 5)
  })

  it('counts a call the shorter limit refuses in no limit: the longer one keeps its room', async () => {
    const { store, prefix } = make()
    const key = `${prefix}{c}`
    const t = windowStart(HOUR) + SECOND
    assert.equal(await admitUntilRefused(store, key, [short, long], t), 3)
    for (let i = 0; i < 3; i++) assert.equal((await admit(store, call(key, [short, long], 1, t))).allowed, false)
    // 20 s later the 10 s limit is empty again; the hour has 5 − 3 = 2 left (none, had the four
    // refused calls counted in it).
    assert.equal(await admitUntilRefused(store, key, [short, long], t + 20 * SECOND), 2)
  })

  it('counts a call the longer limit refuses in no limit: the shorter one is left as it was', async () => {
    const { store, prefix } = make()
    const key = `${prefix}{c}`
    const t = windowStart(HOUR) + SECOND
    const later = t + 20 * SECOND
    await admitUntilRefused(store, key, [short, long], t)
    assert.equal(await admitUntilRefused(store, key, [short, long], later), 2, 'the hour is full, the 10 s limit has 1 left')
    const before = await read(store, key, [short, long], later)
    for (let i = 0; i < 3; i++) assert.equal((await admit(store, call(key, [short, long], 1, later))).allowed, false)
    assert.deepEqual(await read(store, key, [short, long], later), before)
  })

  it('gives back the room of an admitted call on refund, in every limit of the call', async () => {
    const { store, prefix } = make()
    const key = `${prefix}{c}`
    const t = windowStart(HOUR) + SECOND
    const first = call(key, [short, long], 1, t)
    assert.equal((await admit(store, first)).allowed, true)
    assert.equal(await admitUntilRefused(store, key, [short, long], t), 2)
    await store.refund(first)
    assert.equal(await admitUntilRefused(store, key, [short, long], t), 1)
    // The hour holds 3 again (3 admitted, 1 refunded, 1 more): 2 left, or 1 had the refund missed it.
    assert.equal(await admitUntilRefused(store, key, [short, long], t + 20 * SECOND), 2)
  })

  it('never takes a count below zero, even when the same call is refunded twice', async () => {
    const { store, prefix } = make()
    const now = windowStart(MINUTE) + SECOND
    const once = call(`${prefix}{c}`, [one], 1, now)
    await admit(store, once)
    await store.refund(once)
    await store.refund(once)
    assert.equal(await admitUntilRefused(store, `${prefix}{c}`, [one], now), 5)
  })

  // A refund carries its call's time, and undoes the call where it was counted, whenever it
  // arrives: a refund sent after other calls opened the next window does what one sent at once
  // does. For the fixed window that means the next window's count is left alone; for the others
  // the call still weighs in the next moments (previous window, bucket, log), so the refund frees room.
  it('undoes a call refunded after the window edge just as one refunded at once, in its own window only', async () => {
    const { store, prefix } = make()
    const lim = limitSpec(3, 10 * SECOND, 3, '10s')
    const edge = windowStart(10 * SECOND)
    const calls: Record<string, StoreCall> = {}
    for (const c of ['late', 'early', 'control']) {
      calls[c] = call(`${prefix}{${c}}`, [lim], 1, edge - 1) // the window's last ms
      assert.equal((await admit(store, calls[c]!)).allowed, true)
    }
    await store.refund(calls.early!)
    assert.equal((await admit(store, call(`${prefix}{other}`, [lim], 1, edge))).allowed, true) // the next window begins
    await store.refund(calls.late!)
    const admitted: Record<string, number> = {}
    for (const c of ['late', 'early', 'control']) admitted[c] = await admitUntilRefused(store, `${prefix}{${c}}`, [lim], edge)
    assert.deepEqual(admitted, algorithm === 'fixed-window' ? { late: 3, early: 3, control: 3 } : { late: 3, early: 3, control: 2 })
  })

  it("forgets the client's state for the call's limits, and nobody else's", async () => {
    const { store, prefix } = make()
    const t = windowStart(HOUR) + SECOND
    const [c, d] = [`${prefix}{c}`, `${prefix}{d}`]
    assert.equal(await admitUntilRefused(store, c, [short, long], t), 3)
    assert.equal((await admit(store, call(d, [short, long], 1, t))).allowed, true)
    const other = await read(store, d, [short, long], t)
    await store.forget(call(c, [short, long], 0, t))
    assert.deepEqual(await read(store, d, [short, long], t), other)
    // Both limits start over: 3 now (2, had the hour kept its 3), then 2 more in the hour.
    assert.equal(await admitUntilRefused(store, c, [short, long], t), 3)
    assert.equal(await admitUntilRefused(store, c, [short, long], t + 20 * SECOND), 2)
  })

  it('admits exactly 50 of 200 concurrent calls of cost 1 against a max of 50', async () => {
    const { store, prefix } = make()
    const now = windowStart(MINUTE) + SECOND
    const fifty = limitSpec(50, MINUTE, 50, '1m')
    const answers = await Promise.all(Array.from({ length: 200 }, () => store.admit(call(`${prefix}{hot}`, [fifty], 1, now))))
    assert.equal(answers.filter((a) => a.allowed).length, 50)
    assert.equal(await admitUntilRefused(store, `${prefix}{hot}`, [fifty], now), 0)
  })

  if (options.sameAsMemory !== false) memoryAgreementContract(it, algorithm, make)

  const redis = options.redis
  if (redis !== undefined) {
    it('gives every key it writes a TTL', async () => {
      const { store, prefix } = make()
      const t = windowStart(HOUR) + SECOND
      for (const [client, limits] of [
        ['c', [one]],
        ['d', [short, long]],
      ] as const) {
        const key = `${prefix}{${client}}`
        const first = call(key, [...limits], 2, t)
        await admit(store, first)
        await admitUntilRefused(store, key, [...limits], t)
        await store.refund(first)
        await admitUntilRefused(store, key, [...limits], t + 20 * SECOND)
        await read(store, key, [...limits], t + 30 * SECOND)
      }
      if (options.increment !== false) await store.increment!(`${prefix}{e}`, 1, MINUTE, t)
      const written = await keysUnder(redis(), prefix)
      assert.ok(written.length >= 3, `at least 3 keys written under ${prefix}, found ${written.length}`)
      assert.deepEqual(await keysWithoutTtl(redis(), prefix), [])
    })

    it("keeps every key of a call under its client's hash tag, so one call stays in one Cluster slot", async () => {
      const { store, prefix } = make()
      const t = windowStart(HOUR) + SECOND
      const clients = ['203.0.113.7', 'user:42']
      for (const client of clients) for (let i = 0; i < 2; i++) await admit(store, call(`${prefix}{${client}}`, [short, long], 1, t))
      const tags = (await keysUnder(redis(), prefix)).map(hashTag)
      assert.deepEqual([...new Set(tags)].sort(), clients)
      // At least one key per limit, all under the one tag.
      for (const client of clients) {
        const n = tags.filter((tag) => tag === client).length
        assert.ok(n >= 2, `at least 2 keys under {${client}}, found ${n}`)
      }
    })
  }
}
