import { type Decision, Limiter, type LimiterOptions, MemoryStore, RedisStore, type Store, TollgateError } from '@tollgate/core'
import type { Redis } from 'ioredis'
import { newRedisClient, quitClient, testPrefix } from '../harness/redis'
import { testClock } from '../support/time'

// Every pair of features, on the memory store and on Redis: either the limiter refuses the pair at
// construction with a TollgateError naming both, or two limiters sharing one store (two processes,
// each with its own caches and, on Redis, its own client) admit at most `max` for one key in one window,
// net of what was refunded or settled away; after `reset` in one, the other admits the key within a
// second; and no call throws anything but a TollgateError.

const MAX = 4
const START = 1_800_000_000_000 + 5_000 // 5 s into an hour
const quiet = { warn() {}, error() {} }

interface Feature {
  name: string
  /** Words of which one names it in a refusal. */
  named: RegExp
  options?: LimiterOptions
  /** The call's per-limit keys, when the limits have keys of their own. */
  keys?: boolean
  /** How a request is made and what it leaves counted. */
  op?: 'wait' | 'refund' | 'settle'
}

const FEATURES: Feature[] = [
  { name: 'sliding-window', named: /algorithm|sliding-window/, options: { algorithm: 'sliding-window' } },
  { name: 'gcra', named: /algorithm|gcra/, options: { algorithm: 'gcra' } },
  { name: 'sliding-log', named: /algorithm|sliding-log/, options: { algorithm: 'sliding-log' } },
  { name: 'concurrency', named: /algorithm|concurrency/, options: { algorithm: 'concurrency' } },
  {
    name: 'several limits',
    named: /limits/,
    options: {
      limits: [
        { max: MAX, window: '1h' },
        { max: MAX + 3, window: '1d' },
      ],
    },
  },
  {
    name: 'per-limit keys',
    named: /limits|key/,
    keys: true,
    options: {
      limits: [
        { max: MAX + 3, window: '1h' },
        { max: MAX, window: '1h', key: () => 'tenant' },
      ],
    },
  },
  { name: 'blockDuration', named: /blockDuration/, options: { blockDuration: '10m' } },
  { name: 'lease', named: /lease/, options: { lease: true } },
  { name: 'shadow', named: /shadow/, options: { shadow: true } },
  { name: 'onStoreError deny', named: /onStoreError/, options: { onStoreError: 'deny' } },
  { name: 'settle', named: /settle|actualCost/, op: 'settle', options: { actualCost: () => 1 } },
  { name: 'refund', named: /refund|release/, op: 'refund' },
  { name: 'wait', named: /wait/, op: 'wait' },
]

const pairs: Array<[string, Feature, Feature]> = []
for (let i = 0; i < FEATURES.length; i++) {
  for (let j = i + 1; j < FEATURES.length; j++) pairs.push([`${FEATURES[i]!.name} + ${FEATURES[j]!.name}`, FEATURES[i]!, FEATURES[j]!])
}

const clients: Redis[] = []
afterAll(async () => {
  await Promise.all(clients.map(quitClient))
})

/** Two stores that share what they count: one MemoryStore for both, or two RedisStores on two clients of one server. */
function sharedStores(kind: 'memory' | 'Redis'): [Store, Store] {
  if (kind === 'memory') {
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    return [store, store]
  }
  const make = () => {
    const client = newRedisClient()
    clients.push(client)
    return new RedisStore({ client, timeout: '2s' })
  }
  return [make(), make()]
}

/** Runs `call`, failing the test on anything thrown or rejected that is not a TollgateError. */
async function only<T>(what: string, call: () => T | Promise<T>): Promise<T | TollgateError> {
  try {
    return await call()
  } catch (error) {
    if (error instanceof TollgateError) return error
    throw new Error(`${what} threw something other than a TollgateError: ${String(error)}`)
  }
}

describe.each(['memory', 'Redis'] as const)('every pair of features on the %s store', (kind) => {
  it.each(pairs)('%s', async (_name, a, b) => {
    const clock = testClock(START)
    const prefix = testPrefix('composition')
    const [storeA, storeB] = sharedStores(kind)
    // A feature's options win over the defaults; the two features' options merge (their limits cannot both be given).
    const limits = a.options?.limits !== undefined || b.options?.limits !== undefined
    const options = (store: Store): LimiterOptions => ({
      ...(limits ? {} : { max: MAX, window: '1h' }),
      prefix,
      clock: clock.read,
      logger: quiet,
      store,
      ...a.options,
      ...b.options,
    })
    if (a.options?.limits !== undefined && b.options?.limits !== undefined) return // one `limits` option: not a pair
    let limiters: [Limiter, Limiter]
    try {
      limiters = [new Limiter(options(storeA)), new Limiter(options(storeB))]
    } catch (error) {
      expect(error).toBeInstanceOf(TollgateError)
      const message = (error as Error).message
      expect({ message, namesFirst: a.named.test(message), namesSecond: b.named.test(message) }).toEqual({
        message,
        namesFirst: true,
        namesSecond: true,
      })
      return
    }
    const keys = a.keys === true || b.keys === true ? { keys: [undefined, 'tenant'] } : {}
    const op = a.op ?? b.op
    const shadow = a.name === 'shadow' || b.name === 'shadow'

    // 3 × max requests for one key, alternating between the two limiters.
    let net = 0
    for (let i = 0; i < 3 * MAX; i++) {
      const limiter = limiters[i % 2]!
      const d = await only('a request', () =>
        op === 'wait' ? limiter.wait('alice', { maxWaitMs: 0, ...keys }) : limiter.consume('alice', { ...keys }),
      )
      expect(d).not.toBeInstanceOf(TollgateError)
      const decision = d as Decision
      if (!decision.allowed || decision.shadowed === true) continue
      net++
      // Every third admission is given back: refunded, or settled to nothing.
      if (net % 3 === 0 && (op === 'refund' || op === 'settle')) {
        const back = await only(op, () => (op === 'refund' ? limiter.refund(decision) : limiter.settle(decision, 0)))
        if (!(back instanceof TollgateError)) net--
      }
      clock.now += 10
    }
    expect(net).toBeLessThanOrEqual(MAX)
    if (!shadow) expect(net).toBeGreaterThan(0)

    // Over the limit in both; a reset in the first reaches the second within a second.
    for (const limiter of limiters) await only('a request', () => limiter.consume('alice', { ...keys }))
    const reset = await only('reset', () => limiters[0].reset('alice', keys.keys === undefined ? undefined : { keys: keys.keys }))
    expect(reset).not.toBeInstanceOf(TollgateError)
    clock.now += 1000
    const after = (await only('a request after reset', () => limiters[1].consume('alice', { ...keys }))) as Decision
    expect(after).not.toBeInstanceOf(TollgateError)
    expect({ allowed: after.allowed, shadowed: after.shadowed === true }).toEqual({ allowed: true, shadowed: false })
    for (const limiter of limiters) await limiter.close?.()
  })
})
