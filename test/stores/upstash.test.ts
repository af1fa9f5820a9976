import { type AlgorithmName, Limiter } from '@tollgate/core'
import { storeContract } from '@tollgate/core/testing'
import { UpstashStore } from '@tollgate/upstash'
import { Redis as Upstash } from '@upstash/redis'
import { keysWithoutTtl, redisUrl, testPrefix } from '../harness/redis'
import { type RestFront, startRestFront } from '../harness/upstash-rest'
import { useRedis } from '../harness/use-redis'

/*
 * The Upstash store against a real redis-server behind a REST front of the Upstash protocol
 * (test/harness/upstash-rest.ts): the store contract, exactness across stores, and what each decision
 * costs in HTTP requests. Failures of the front: upstash-faults.test.ts.
 */

const db = useRedis()
let front: RestFront
beforeAll(async () => {
  front = await startRestFront(redisUrl())
})
afterAll(() => front.close())

/** A client of the front as an app makes one; no retries, so a test's failures are its own. */
function client(options: { responseEncoding?: false } = {}): Upstash {
  return new Upstash({ url: front.url, token: front.token, retry: false, enableTelemetry: false, ...options })
}

/** A store on a client of its own, as each process has one. */
const store = () => new UpstashStore({ client: client(), timeout: '2s' })

storeContract('Upstash REST', () => ({ store: store(), prefix: testPrefix('upstash') }), {
  redis: () => db.client,
})
storeContract(
  'Upstash REST, unbatched, without base64',
  () => ({
    store: new UpstashStore({ client: client({ responseEncoding: false }), batch: false, timeout: '2s' }),
    prefix: testPrefix('upstash-plain'),
  }),
  { redis: () => db.client },
)

const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log']

describe('UpstashStore across instances', () => {
  it.each(ALGORITHMS)('admits exactly max from a concurrent burst over two limiters sharing one Redis (%s)', async (algorithm) => {
    const prefix = testPrefix(`two-${algorithm}`)
    // A fixed clock in the middle of a window, so no window edge falls inside the burst.
    const now = (Math.floor(Date.now() / 60_000) + 1) * 60_000 + 1000
    const limiter = () => new Limiter({ max: 20, window: '1m', algorithm, prefix, clock: () => now, store: store() })
    const [a, b] = [limiter(), limiter()]
    const decisions = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? a : b).consume('203.0.113.7')))
    expect(decisions.filter((d) => d.source !== 'store')).toEqual([])
    expect(decisions.filter((d) => d.allowed)).toHaveLength(20)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })
})

describe('UpstashStore requests', () => {
  const sent = () => [...front.requests.values()].reduce((a, b) => a + b, 0)

  it('sends one request per decision: the transaction of the fixed window, the script of the others', async () => {
    for (const algorithm of ['fixed-window', 'gcra'] as const) {
      const limiter = new Limiter({ max: 5, algorithm, prefix: testPrefix('one'), store: store() })
      await limiter.consume('warm-up') // a fresh process loads the script once (NOSCRIPT, then EVAL)
      const before = sent()
      for (let i = 0; i < 4; i++) expect((await limiter.consume(`client-${i}`)).source).toBe('store')
      expect(sent() - before).toBe(4)
    }
  })

  it('runs the scripts by SHA, and again by EVAL once Redis has lost them', async () => {
    const limiter = new Limiter({ max: 5, algorithm: 'gcra', prefix: testPrefix('noscript'), store: store() })
    await limiter.consume('a')
    const evals = front.commands.get('EVAL') ?? 0
    await db.client.script('FLUSH')
    const decision = await limiter.consume('a')
    expect([decision.source, decision.remaining]).toEqual(['store', 3])
    expect((front.commands.get('EVAL') ?? 0) - evals).toBe(1)
  })

  it('counts the decisions of one turn in one request', async () => {
    const limiter = new Limiter({ max: 50, algorithm: 'sliding-window', prefix: testPrefix('turn'), store: store() })
    await limiter.consume('warm-up')
    const before = sent()
    const decisions = await Promise.all(Array.from({ length: 10 }, (_, i) => limiter.consume(`client-${i % 3}`)))
    expect(decisions.every((d) => d.source === 'store' && d.allowed)).toBe(true)
    expect(sent() - before).toBe(1)
  })
})

describe('UpstashStore options', () => {
  it('refuses a client that is not an @upstash/redis client, naming what to use instead', () => {
    expect(() => new UpstashStore({ client: db.client as never })).toThrow(/@upstash\/redis.*without createScript\(\).*RedisStore/)
    expect(() => new UpstashStore({ client: client(), timeot: '1s' } as never)).toThrow(/Unknown UpstashStore option "timeot"/)
  })
})
