import { type AlgorithmName, type Decision, Limiter, type LimiterOptions, MemoryStore, RedisStore } from '@tollgate/core'
import { keysWithoutTtl, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { random } from '../support/random'

// Property test: the same random request sequences (times, costs, keys) go through a limiter on the
// memory store and one on Redis, sharing one injected clock. Every decision must match.
const db = useRedis()

type Case = [string, AlgorithmName, Partial<LimiterOptions>]
const cases: Case[] = [
  ['fixed-window', 'fixed-window', { max: 5 }],
  [
    'fixed-window, several limits',
    'fixed-window',
    {
      limits: [
        { max: 5, window: '1s' },
        { max: 12, window: '5s' },
      ],
    },
  ],
  ['sliding-window', 'sliding-window', { max: 5 }],
  [
    'sliding-window, several limits',
    'sliding-window',
    {
      limits: [
        { max: 4, window: '1s' },
        { max: 9, window: '3s' },
      ],
    },
  ],
  ['gcra', 'gcra', { max: 5 }],
  ['gcra with a burst of 2', 'gcra', { max: 7, burst: 2 }],
  [
    'gcra, several limits whose window / max is not a whole number of ms',
    'gcra',
    {
      limits: [
        { max: 3, window: '1s' },
        { max: 7, window: '3s', burst: 4 },
      ],
    },
  ],
  [
    'gcra, several limits',
    'gcra',
    {
      limits: [
        { max: 5, window: '1s' },
        { max: 20, window: '10s', burst: 8 },
      ],
    },
  ],
  ['sliding-log', 'sliding-log', { max: 5 }],
  [
    'sliding-log, several limits',
    'sliding-log',
    {
      limits: [
        { max: 5, window: '1s' },
        { max: 11, window: '4s' },
      ],
    },
  ],
]

describe.each(cases)('%s: memory and Redis decide alike', (_name, algorithm, options) => {
  it.each([1, 2, 3])('for random sequence #%d of 300 requests', async (seed) => {
    const next = random(seed * 7919 + algorithm.length)
    let now = Math.floor(Date.now() / 60_000) * 60_000 + Math.floor(next() * 1000)
    const prefix = testPrefix(`equivalence-${algorithm}`)
    const common = { ...options, algorithm, clock: () => now, prefix } as LimiterOptions
    const memory = new Limiter({ ...common, store: new MemoryStore({ sweepIntervalMs: 0 }) })
    const redis = new Limiter({ ...common, store: new RedisStore({ client: db.client, timeout: '2s' }) })
    const pick = (d: Decision) => ({ allowed: d.allowed, remaining: d.remaining, retryAfterMs: d.retryAfterMs, resetAt: d.resetAt })
    let admitted = 0
    let refused = 0
    for (let step = 0; step < 300; step++) {
      now += Math.floor(next() * next() * 400) // bursts and pauses, crossing window edges
      const key = `client-${Math.floor(next() * 3)}`
      const cost = next() < 0.8 ? 1 : 1 + Math.floor(next() * 3)
      const [m, r] = await Promise.all([memory.consume(key, cost), redis.consume(key, cost)])
      expect({ step, ...pick(r) }).toEqual({ step, ...pick(m) })
      if (m.allowed) admitted++
      else refused++
      if (m.limits) expect(r.limits!.map(pick)).toEqual(m.limits.map(pick))
    }
    // The sequences really exercise both outcomes.
    expect(admitted).toBeGreaterThan(20)
    expect(refused).toBeGreaterThan(10)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })
})
