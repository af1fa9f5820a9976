import { type Decision, Limiter, RedisStore } from '@tollgate/core'
import { keySlot } from '../../packages/core/src/stores/redis/slots'
import { testPrefix } from '../harness/redis'
import { useCluster } from './use-cluster'

// `lease` on a real local Redis Cluster of three masters, through an ioredis Cluster and a node-redis
// cluster: three limiters (three lessees, as three processes would be) lease the quota of keys spread
// over the masters, each key's count, lessee counter and markers in its client's slot.
const c = useCluster()

const MAX = 40
const CLIENTS = Array.from({ length: 8 }, (_, i) => `client-${i}`)
const now = 1_800_000_000_000 + 1000

describe.each(c.clients)('through %s', (_name, storeClient) => {
  it.each(['fixed-window', 'gcra'] as const)(
    '%s: three lessees flooding 8 keys admit exactly max of each, with every key in its slot and a TTL',
    async (algorithm) => {
      const prefix = testPrefix('cluster-lease')
      const limiters = [0, 1, 2].map(
        () =>
          new Limiter({
            max: MAX,
            window: '1m',
            algorithm,
            lease: true,
            prefix,
            clock: () => now,
            store: new RedisStore({ client: storeClient(), timeout: '2s' }),
          }),
      )
      const errors: unknown[] = []
      for (const limiter of limiters) limiter.on('storeError', (e) => errors.push(e))
      const decisions = await Promise.all(
        CLIENTS.flatMap((key) => limiters.flatMap((limiter) => Array.from({ length: MAX }, () => limiter.consume(key)))),
      )
      expect(errors).toEqual([])
      const admitted = (key: string) => decisions.filter((d: Decision) => d.allowed && d.key.endsWith(key)).length
      for (const key of CLIENTS) expect(admitted(key)).toBe(MAX)
      await Promise.all(limiters.map((l) => l.close()))

      const keys = await c.keysUnder(prefix)
      // The keys landed on more than one master, and every key of a client in its client's slot.
      const slots = new Set(keys.map((k) => keySlot(k)))
      expect(slots.size).toBeGreaterThan(1)
      for (const key of CLIENTS) {
        const own = keys.filter((k) => k.includes(`{${key}}`))
        expect(own.length).toBeGreaterThan(0)
        expect(new Set(own.map((k) => keySlot(k))).size).toBe(1)
      }
      const ttls = await Promise.all(keys.map((k) => c.client.pttl(k)))
      expect(keys.filter((_, i) => ttls[i] === -1)).toEqual([])
    },
  )
})
