import { type AlgorithmName, Limiter } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'

// limiter.refund(decision) undoes an admitted decision of that limiter whether or not a skip*Requests
// option is on, once, in the store that counted it; a decision of another limiter is left alone.

const db = useRedis()

const stores = db.stores()
const algorithms: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log']
const now = 1_800_000_000_000 + 1000

describe.each(stores)('limiter.refund on the %s store', (_name, makeStore) => {
  it.each(algorithms)('%s: gives the unit back, once, without any refund option', async (algorithm) => {
    const limiter = new Limiter({ algorithm, max: 2, window: '1m', store: makeStore(), prefix: testPrefix('refund'), clock: () => now })
    const first = await limiter.consume('c')
    await limiter.consume('c')
    expect((await limiter.peek('c')).remaining).toBe(0)
    await limiter.refund(first)
    await limiter.refund(first) // a second refund of the same decision changes nothing
    expect((await limiter.peek('c')).remaining).toBe(1)
    expect((await limiter.consume('c')).allowed).toBe(true)
    expect((await limiter.consume('c')).allowed).toBe(false)
  })

  it('leaves a decision of another limiter alone, and a refused one', async () => {
    const store = makeStore()
    const prefix = testPrefix('refund-other')
    const ours = new Limiter({ max: 2, window: '1m', store, prefix, clock: () => now })
    const theirs = new Limiter({ max: 2, window: '1m', store: makeStore(), prefix: testPrefix('refund-theirs'), clock: () => now })
    await ours.consume('c')
    await ours.consume('c')
    const refused = await ours.consume('c')
    await ours.refund(refused)
    await ours.refund(await theirs.consume('c'))
    expect((await ours.peek('c')).remaining).toBe(0)
  })
})
