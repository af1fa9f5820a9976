import { type AlgorithmName, Limiter, RedisStore } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// What a limiter leaves in the user's Redis. The record that keeps a resent call from counting twice
// lives in the limit's own keys (algorithms/protocol.ts), so a client costs its limit keys and nothing
// else, and `reset` of a client leaves nothing behind, whatever windows its traffic spanned.

const db = useRedis({ nodeRedis: true })
const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log', 'concurrency']
const CLIENTS = 50
const T0 = 1_800_000_000_000

describe.each(['ioredis', 'node-redis'] as const)('through %s', (kind) => {
  it.each(ALGORITHMS)('%s: at most 2 keys per client key, and none left after a reset of every client', async (algorithm) => {
    const prefix = testPrefix(`reset-${algorithm}`)
    let now = T0
    const limiter = new Limiter({
      algorithm,
      max: 1000,
      window: '1s',
      prefix,
      clock: () => now,
      store: new RedisStore({ client: kind === 'ioredis' ? db.client : db.nodeRedis, timeout: '2s' }),
    })
    const clients = Array.from({ length: CLIENTS }, (_, i) => `c${i}`)
    // Two windows of traffic (a key outlives its use by at most the TTL margin, in real time: this clock
    // moves faster), several decisions per client in each, all at once within a window.
    for (let w = 0; w < 2; w++) {
      now = T0 + w * 1000 + 100
      for (let round = 0; round < 4; round++) {
        const decisions = await Promise.all(clients.map((c) => limiter.consume(c)))
        expect(decisions.filter((d) => d.allowed && d.source === 'store')).toHaveLength(CLIENTS)
      }
    }
    const keys = await db.client.keys(`${prefix}*`)
    // One key per client for a one-key algorithm; the window algorithms keep the previous window too.
    expect(keys.length).toBe(algorithm === 'fixed-window' || algorithm === 'sliding-window' ? 2 * CLIENTS : CLIENTS)
    await Promise.all(clients.map((c) => limiter.reset(c)))
    expect(await db.client.keys(`${prefix}*`)).toEqual([])
    await limiter.close()
  })
})
