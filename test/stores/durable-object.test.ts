import { randomUUID } from 'node:crypto'
import { type DurableObjectNamespaceLike, DurableObjectStore } from '@tollgate/cloudflare'
import { type AlgorithmName, Limiter } from '@tollgate/core'
import { storeContract } from '@tollgate/core/testing'
import { startWorkerd, type Workerd } from '../harness/miniflare'

/*
 * The Durable Object store against real Durable Objects in workerd (Miniflare): the store contract from
 * this process through Miniflare's stubs, exactness across stores and from inside a Worker, and an object
 * that never answers. Restarts and expiry: durable-object-storage.test.ts.
 */

let workerd: Workerd
let namespace: DurableObjectNamespaceLike
beforeAll(async () => {
  workerd = await startWorkerd()
  namespace = await workerd.namespace('TOLLGATE')
})
afterAll(() => workerd.dispose())

const store = () => new DurableObjectStore({ namespace, timeout: '5s' })
const prefix = (name: string) => `tg:${name}:${randomUUID().slice(0, 8)}:`

storeContract('Durable Object', () => ({ store: store(), prefix: prefix('contract') }))

const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log']

describe('DurableObjectStore across instances', () => {
  it.each(ALGORITHMS)('admits exactly max from a concurrent burst over two limiters on one namespace (%s)', async (algorithm) => {
    const p = prefix(`two-${algorithm}`)
    // A fixed clock in the middle of a window, so no window edge falls inside the burst.
    const now = (Math.floor(Date.now() / 60_000) + 1) * 60_000 + 1000
    const limiter = () => new Limiter({ max: 20, window: '1m', algorithm, prefix: p, clock: () => now, store: store() })
    const [a, b] = [limiter(), limiter()]
    const decisions = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? a : b).consume('203.0.113.7')))
    expect(decisions.filter((d) => d.source !== 'store')).toEqual([])
    expect(decisions.filter((d) => d.allowed)).toHaveLength(20)
  })

  it.each(['fixed-window', 'gcra'])('admits exactly max of a burst of requests to a Worker that limits with it (%s)', async (algorithm) => {
    const query = `algorithm=${algorithm}&max=10&prefix=${prefix('worker')}&key=198.51.100.4`
    const answers = await Promise.all(
      Array.from({ length: 40 }, () =>
        workerd.miniflare
          .dispatchFetch(`http://worker.test/consume?${query}`)
          .then((r) => r.json() as Promise<{ allowed: boolean; source: string }>),
      ),
    )
    expect(answers.filter((a) => a.source !== 'store' && a.source !== 'cache')).toEqual([])
    expect(answers.filter((a) => a.allowed)).toHaveLength(10)
  })
})

describe('DurableObjectStore when the object does not answer', () => {
  const TIMEOUT_MS = 200
  const quiet = { warn() {}, error() {} }

  it.each([
    ['fallback', true],
    ['deny', false],
  ] as const)('decides by onStoreError "%s" within the deadline', async (onStoreError, allowed) => {
    const silent = new DurableObjectStore({ namespace: await workerd.namespace('SILENT'), timeout: TIMEOUT_MS })
    const limiter = new Limiter({ max: 5, algorithm: 'gcra', prefix: prefix('silent'), store: silent, onStoreError, logger: quiet })
    const started = Date.now()
    const decision = await limiter.consume('a')
    expect([decision.source, decision.allowed]).toEqual([onStoreError, allowed])
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 400)
  })
})

describe('DurableObjectStore options', () => {
  it('refuses a namespace that is not one, and a per-limit key without a hash tag its object can own', () => {
    expect(() => new DurableObjectStore({ namespace: {} as never })).toThrow(/Invalid option "namespace".*idFromName/)
    expect(() => new DurableObjectStore({ namespace, timeot: 5 } as never)).toThrow(/Unknown DurableObjectStore option "timeot"/)
    const limits = [
      { max: 5, window: '1s' },
      { max: 50, window: '1m', key: () => 'tenant' },
    ] as const
    expect(() => new Limiter({ store: store(), limits: [...limits] })).toThrow(/hashTag/)
  })
})
