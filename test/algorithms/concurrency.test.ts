import { type Decision, Limiter, type LimiterOptions, MemoryStore, RedisStore, type Store, TollgateError } from '@tollgate/core'
import { limitSpec, storeCall } from '@tollgate/core/testing'
import { parseDictionary, parseList } from 'structured-headers'
import { keysWithoutTtl, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { testClock } from '../support/time'

// Algorithm "concurrency": at most max requests of a client in flight. An admitted request holds a
// slot until it is released (or refunded), and never longer than the window; a refusal says to look
// again shortly, since a slot frees whenever a request ends (packages/core/src/algorithms/concurrency.ts).

const db = useRedis({ nodeRedis: true })
const W = 10_000
const start = 1_800_000_000_000 + 123

const stores: Array<[string, () => Store]> = [
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis through ioredis', () => new RedisStore({ client: db.client, timeout: '2s' })],
  ['Redis through node-redis', () => new RedisStore({ client: db.nodeRedis, timeout: '2s' })],
]

const brief = (d: Decision) => [d.allowed, d.remaining, d.retryAfterMs]

describe.each(stores)('algorithm "concurrency" on the %s store', (storeName, makeStore) => {
  const setup = (options: LimiterOptions = {}) => {
    const clock = testClock(start)
    const prefix = testPrefix('concurrency')
    const limiter = new Limiter({ algorithm: 'concurrency', max: 3, window: W, store: makeStore(), prefix, clock: clock.read, ...options })
    return { limiter, clock, prefix }
  }
  const noKeyWithoutTtl = async (prefix: string) => {
    if (storeName !== 'memory') expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  }

  it('admits max requests in flight, refuses the next for a second, and admits one again once one is released', async () => {
    const { limiter, prefix } = setup()
    const held = [await limiter.consume('c'), await limiter.consume('c'), await limiter.consume('c')]
    expect(held.map(brief)).toEqual([
      [true, 2, 0],
      [true, 1, 0],
      [true, 0, 0],
    ])
    const refused = await limiter.consume('c')
    expect([...brief(refused), refused.resetAt - start, refused.policy.name]).toEqual([false, 0, 1000, 1000, '3-concurrent'])
    await limiter.release(held[1]!)
    expect(brief(await limiter.consume('c'))).toEqual([true, 0, 0])
    expect((await limiter.consume('c')).allowed).toBe(false)
    await noKeyWithoutTtl(prefix)
  })

  it('releases a decision once: a second release, or a refund after it, frees nothing more', async () => {
    const { limiter } = setup()
    const first = await limiter.consume('c')
    await limiter.consume('c')
    await limiter.consume('c')
    await limiter.release(first)
    await limiter.release(first)
    await limiter.refund(first)
    expect((await limiter.consume('c')).allowed).toBe(true)
    expect((await limiter.consume('c')).allowed).toBe(false)
  })

  it('frees a slot held for the whole window, as for a process that died mid-request, and no sooner', async () => {
    const { limiter, clock } = setup()
    for (let i = 0; i < 3; i++) await limiter.consume('c')
    clock.now = start + W - 1
    // The oldest slot expires in 1 ms: the wait is that, not the usual second.
    expect(brief(await limiter.consume('c'))).toEqual([false, 0, 1])
    clock.now = start + W
    expect(brief(await limiter.consume('c'))).toEqual([true, 2, 0])
  })

  it('takes `cost` slots for one request and frees them all on its release; a request costing more than max is refused', async () => {
    const { limiter } = setup()
    const two = await limiter.consume('c', 2)
    expect(brief(two)).toEqual([true, 1, 0])
    expect((await limiter.consume('c', 2)).allowed).toBe(false)
    await limiter.release(two)
    expect(brief(await limiter.consume('c', 3))).toEqual([true, 0, 0])
    expect(brief(await limiter.consume('d', 4))).toEqual([false, 0, 1000])
  })

  it('admits exactly 3 of 10 concurrent requests of one client, and 3 more once those are released', async () => {
    const { limiter, prefix } = setup()
    const first = await Promise.all(Array.from({ length: 10 }, () => limiter.consume('hot')))
    expect(first.filter((d) => d.allowed)).toHaveLength(3)
    await Promise.all(first.map((d) => limiter.release(d)))
    const second = await Promise.all(Array.from({ length: 10 }, () => limiter.consume('hot')))
    expect(second.filter((d) => d.allowed)).toHaveLength(3)
    await noKeyWithoutTtl(prefix)
  })

  it('peeks at the free slots without taking one, and reset frees every slot of the client', async () => {
    const { limiter } = setup()
    await limiter.consume('c')
    await limiter.consume('c')
    expect(brief(await limiter.peek('c'))).toEqual([true, 1, 0])
    await limiter.consume('c')
    expect(brief(await limiter.peek('c'))).toEqual([false, 0, 1000])
    await limiter.reset('c')
    expect(brief(await limiter.peek('c'))).toEqual([true, 3, 0])
    expect((await limiter.consume('c')).allowed).toBe(true)
  })

  it('in shadow mode lets the refused request through holding no slot', async () => {
    const { limiter } = setup({ shadow: true })
    const held = [await limiter.consume('c'), await limiter.consume('c'), await limiter.consume('c')]
    const over = await limiter.consume('c')
    expect([over.allowed, over.shadowed]).toEqual([true, true])
    await limiter.release(over)
    await limiter.release(held[0]!)
    expect((await limiter.consume('c')).shadowed).toBeUndefined()
    expect((await limiter.consume('c')).shadowed).toBe(true)
  })

  it('holds each slot in every limit of `limits`, and a request one limit refuses in none', async () => {
    const { limiter } = setup({
      max: undefined,
      window: undefined,
      limits: [
        { max: 2, window: '10s' },
        { max: 5, window: '1m' },
      ],
    })
    const a = await limiter.consume('c')
    await limiter.consume('c')
    const refused = await limiter.consume('c')
    expect([refused.allowed, refused.policy.name]).toEqual([false, '2-concurrent'])
    await limiter.release(a)
    const again = await limiter.consume('c')
    expect(again.limits!.map((d) => [d.policy.name, d.remaining])).toEqual([
      ['2-concurrent', 0],
      ['5-concurrent', 3],
    ])
  })

  // A memory store has no connection to resend on: only Redis replays a call.
  const onRedis = storeName === 'memory' ? it.skip : it
  onRedis('counts an admit sent twice with one call id once (a resend after a reconnect)', async () => {
    const store = makeStore()
    const prefix = testPrefix('concurrency-resend')
    const limit = limitSpec(2, W)
    const call = storeCall('concurrency', `${prefix}{c}`, [limit], 1, start)
    expect((await store.admit(call)).allowed).toBe(true)
    // Sent again, it is answered admitted, as its first run was, and holds no second slot (one is left).
    expect((await store.admit(call)).allowed).toBe(true)
    expect((await store.admit(storeCall('concurrency', `${prefix}{c}`, [limit], 1, start))).allowed).toBe(true)
    expect((await store.admit(storeCall('concurrency', `${prefix}{c}`, [limit], 1, start))).allowed).toBe(false)
    await store.refund(call)
    await store.refund(call)
    expect((await store.admit(storeCall('concurrency', `${prefix}{c}`, [limit], 1, start))).allowed).toBe(true)
    expect((await store.admit(storeCall('concurrency', `${prefix}{c}`, [limit], 1, start))).allowed).toBe(false)
  })
})

describe('algorithm "concurrency": what a client reads', () => {
  const decide = async (options: LimiterOptions, n: number) => {
    const limiter = new Limiter({ algorithm: 'concurrency', max: 2, window: '30s', clock: () => start, ...options })
    const decisions: Decision[] = []
    for (let i = 0; i < n; i++) decisions.push(await limiter.consume('c'))
    return { limiter, last: decisions[n - 1]! }
  }

  it('says in draft-8 fields that the limit counts requests in flight: qu="concurrent-requests", no window, r the free slots, t one second', async () => {
    const { limiter, last } = await decide({}, 1)
    const allowed = limiter.headers([last])
    expect(allowed).toEqual({ 'RateLimit-Policy': '"2-concurrent";q=2;qu="concurrent-requests"', RateLimit: '"2-concurrent";r=1;t=1' })
    const [name, params] = (parseList(allowed['RateLimit-Policy']!) as Array<[unknown, Map<string, unknown>]>)[0]!
    expect([String(name), params.get('q'), String(params.get('qu')), params.has('w')]).toEqual([
      '2-concurrent',
      2,
      'concurrent-requests',
      false,
    ])
    const refused = (await decide({}, 3)).limiter
    const over = await refused.consume('c')
    expect(refused.headers([over])).toEqual({
      'RateLimit-Policy': '"2-concurrent";q=2;qu="concurrent-requests"',
      RateLimit: '"2-concurrent";r=0;t=1',
      'Retry-After': '1',
      'Cache-Control': 'no-store',
    })
    const body = JSON.parse((await refused.rejection(undefined, over)).body) as { detail: string }
    expect(body.detail).toBe(
      'Too many requests in flight: the limit is 2 at once. Retry after the number of seconds in the Retry-After header.',
    )
  })

  it('keeps the draft-7, draft-6 and legacy fields well formed, with the window as the required w', async () => {
    const seven = await decide({ headers: 'draft-7' }, 3)
    const h7 = seven.limiter.headers([seven.last])
    expect(h7).toMatchObject({ 'RateLimit-Policy': '2;w=30', RateLimit: 'limit=2, remaining=0, reset=1', 'Retry-After': '1' })
    expect(Object.fromEntries([...parseDictionary(h7.RateLimit!)].map(([k, [v]]) => [k, v]))).toEqual({ limit: 2, remaining: 0, reset: 1 })
    const six = await decide({ headers: 'draft-6', legacyHeaders: true }, 1)
    expect(six.limiter.headers([six.last])).toEqual({
      'RateLimit-Policy': '2;w=30',
      'RateLimit-Limit': '2',
      'RateLimit-Remaining': '1',
      'RateLimit-Reset': '1',
      'X-RateLimit-Limit': '2',
      'X-RateLimit-Remaining': '1',
      'X-RateLimit-Reset': String(Math.ceil((start + 1000) / 1000)),
    })
  })

  it('holds a slot for at most a minute unless `window` says otherwise', () => {
    expect(new Limiter({ algorithm: 'concurrency', max: 2 }).config.windowMs).toBe(60_000)
    expect(new Limiter({ algorithm: 'concurrency', max: 2, window: '5m' }).config.windowMs).toBe(300_000)
  })

  it.each([
    ['window', () => '1s', /Invalid option "window": expected a duration with algorithm "concurrency"/],
    ['blockDuration', '1m', /Invalid option "blockDuration": expected no blockDuration with algorithm "concurrency"/],
    ['skipFailedRequests', true, /Invalid option "skipFailedRequests": expected no skipFailedRequests with algorithm "concurrency"/],
    ['skipSuccessfulRequests', true, /Invalid option "skipSuccessfulRequests": expected no skipSuccessfulRequests/],
    ['burst', 5, /Invalid option "burst"/],
  ])('refuses %s at construction, naming it', (option, value, message) => {
    const make = () => new Limiter({ algorithm: 'concurrency', max: 2, [option]: value } as LimiterOptions)
    expect(make).toThrow(TollgateError)
    expect(make).toThrow(message)
  })

  it('release changes nothing under a rate algorithm, where refund gives the unit back', async () => {
    const limiter = new Limiter({ max: 1, window: '1m', clock: () => start })
    const first = await limiter.consume('c')
    await limiter.release(first)
    expect((await limiter.peek('c')).remaining).toBe(0)
    await limiter.refund(first)
    expect((await limiter.peek('c')).remaining).toBe(1)
  })
})
