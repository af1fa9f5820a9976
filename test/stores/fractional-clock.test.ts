import { type AlgorithmName, Limiter, RedisStore } from '@tollgate/core'
import { keysWithoutTtl, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// A clock with a fraction of a ms (performance.now() based, as a test or a simulation may inject) must
// count in Redis like Date.now: Redis takes whole ms only in PEXPIRE and SET PX, and a refused PEXPIRE in
// the fixed window's transaction once left its key counting with no TTL at all.
const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log']

const db = useRedis()

it.each(ALGORITHMS)('%s on Redis counts with a clock that has a fraction of a ms, and every key it writes expires', async (algorithm) => {
  const prefix = testPrefix('fractional-clock')
  const t0 = performance.now()
  const start = Date.now() + 0.37
  const limiter = new Limiter({
    algorithm,
    max: 3,
    window: '1m',
    prefix,
    store: new RedisStore({ client: db.client, timeout: 1000 }),
    clock: () => start + (performance.now() - t0),
  })
  const decisions = []
  for (let i = 0; i < 4; i++) decisions.push(await limiter.consume('client'))
  expect(decisions.map((d) => [d.source, d.allowed])).toEqual([
    ['store', true],
    ['store', true],
    ['store', true],
    ['store', false],
  ])
  expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
})
