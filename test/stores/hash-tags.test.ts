import { type AlgorithmName, Limiter, type LimiterOptions, RedisStore } from '@tollgate/core'
import { escapeGlob, keysWithoutTtl, scanKeys, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// A client key can never break the Redis Cluster hash tag: braces in it are escaped in the store key
// (and "%", the escape character, so two different client keys never share a store key). On a
// Cluster a broken tag spreads one call's keys over slots (CROSSSLOT); test/cluster runs the same
// keys there.

const db = useRedis()

const awkward = ['}abc', 'a{b}c', '{', '%7B', '{}', 'x%y']

/** The text Redis Cluster hashes a key by: inside its first `{...}` when not empty, else the whole key. */
function hashTag(key: string): string {
  const open = key.indexOf('{')
  const close = open === -1 ? -1 : key.indexOf('}', open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : key
}

const setups: Array<[string, Partial<LimiterOptions>]> = [
  ['fixed window', { max: 2, window: '1m' }],
  ['sliding window', { max: 2, window: '1m', algorithm: 'sliding-window' as AlgorithmName }],
  [
    'several limits',
    {
      limits: [
        { max: 2, window: '1m' },
        { max: 50, window: '1h' },
      ],
    },
  ],
]

describe.each(setups)('client keys with braces, %s', (_name, options) => {
  it('count exactly, each on its own, with every key of one client under one hash tag', async () => {
    const prefix = testPrefix('tags')
    const limiter = new Limiter({ ...options, store: new RedisStore({ client: db.client, timeout: '2s' }), prefix })
    for (const key of awkward) {
      const allowed = []
      for (let i = 0; i < 3; i++) allowed.push((await limiter.consume(key)).allowed)
      expect([key, allowed]).toEqual([key, [true, true, false]])
    }
    const keys = await scanKeys(db.client, `${escapeGlob(prefix)}*`)
    const tags = new Set(keys.map(hashTag))
    expect(tags.size).toBe(awkward.length) // one tag per client, none shared, none broken
    for (const tag of tags) expect(tag).not.toMatch(/[{}]/)
    expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
  })
})
