import { getEventListeners } from 'node:events'
import { type AlgorithmName, type Decision, Limiter, type LimiterOptions, MemoryStore, type WaitOptions } from '@tollgate/core'

// limiter.wait on a clock the test moves: jest's fake timers move Date.now and setTimeout together, and
// the limiter reads Date.now as its clock, so every sleep and every window edge is exact.

const T0 = 1_800_000_000_000 // the start of a 1 s window

beforeEach(() => {
  jest.useFakeTimers({ now: T0, doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] })
})
afterEach(() => {
  jest.useRealTimers()
})

function limiterOf(options: LimiterOptions<unknown> = {}): { limiter: Limiter; tries: Decision[] } {
  const limiter = new Limiter({ max: 5, window: '1s', store: new MemoryStore({ sweepIntervalMs: 0 }), clock: () => Date.now(), ...options })
  const tries: Decision[] = []
  limiter.on('decision', (d: Decision) => tries.push(d))
  return { limiter, tries }
}

/** Starts `n` waits on `key`; `settled` lists the indexes in the order their promises resolved. */
function waiters(limiter: Limiter, n: number, options: WaitOptions, key = 'job') {
  const settled: number[] = []
  const decisions: Decision[] = []
  const all = Promise.all(
    Array.from({ length: n }, (_, i) =>
      limiter.wait(key, options).then((d) => {
        settled.push(i)
        decisions[i] = d
        return d
      }),
    ),
  )
  return { settled, decisions, all }
}

/** The waiting's queues of a limiter (kept off its public surface). */
function queues(limiter: Limiter): { size: number; keys: number } {
  const waiting = (limiter as unknown as { waiting?: { size: number; keys: number } }).waiting
  return { size: waiting?.size ?? 0, keys: waiting?.keys ?? 0 }
}

describe('limiter.wait (fixed window, memory store)', () => {
  it('admits 5 waiters per window in arrival order, each when its window starts, with one refused try per window waited', async () => {
    const { limiter, tries } = limiterOf()
    const { settled, decisions, all } = waiters(limiter, 20, { maxWaitMs: 10_000 })
    await jest.advanceTimersByTimeAsync(0)
    expect(settled).toEqual([0, 1, 2, 3, 4])
    await jest.advanceTimersByTimeAsync(999)
    expect(settled).toHaveLength(5) // nothing before the window has room
    for (let w = 1; w <= 3; w++) {
      await jest.advanceTimersByTimeAsync(1)
      expect(settled).toEqual(Array.from({ length: 5 * (w + 1) }, (_, i) => i))
      await jest.advanceTimersByTimeAsync(999)
    }
    await all
    expect(decisions.every((d) => d.allowed && d.source === 'store')).toBe(true)
    expect(decisions.map((d) => d.at)).toEqual(Array.from({ length: 20 }, (_, i) => T0 + 1000 * Math.floor(i / 5)))
    // Tried only when a window started: 20 admissions and the head's one refusal before each new window.
    expect(tries.map((d) => `${d.at - T0}:${d.allowed}`)).toEqual(
      [0, 1000, 2000, 3000].flatMap((t) => [...Array.from({ length: 5 }, () => `${t}:true`), ...(t < 3000 ? [`${t}:false`] : [])]),
    )
    expect(queues(limiter)).toEqual({ size: 0, keys: 0 })
  })

  it('resolves the late waiters refused at maxWaitMs, in arrival order, counting nothing for those that never tried', async () => {
    const { limiter, tries } = limiterOf()
    const { settled, decisions, all } = waiters(limiter, 20, { maxWaitMs: 300 })
    await jest.advanceTimersByTimeAsync(299)
    expect(settled).toEqual([0, 1, 2, 3, 4])
    await jest.advanceTimersByTimeAsync(1)
    await all
    expect(settled).toEqual(Array.from({ length: 20 }, (_, i) => i))
    for (const d of decisions.slice(5)) {
      expect(d).toMatchObject({ allowed: false, at: T0 + 300, retryAfterMs: 700, resetAt: T0 + 1000, cost: 1, remaining: 0 })
    }
    expect(tries.filter((d) => !d.allowed)).toHaveLength(1) // the head's one try; the 14 behind it never tried
    expect((await limiter.peek('job')).count).toBe(5)
    expect(queues(limiter)).toEqual({ size: 0, keys: 0 })
  })

  it('admits a waiter whose deadline is the start of the next window: the try due then comes first', async () => {
    const { limiter } = limiterOf()
    jest.setSystemTime(T0 + 700)
    const { decisions, all } = waiters(limiter, 6, { maxWaitMs: 300 })
    await jest.advanceTimersByTimeAsync(300)
    await all
    expect(decisions[5]).toMatchObject({ allowed: true, at: T0 + 1000 })
  })

  it('admits a waiter whose wait spans a window edge and refuses the ones behind it at their deadline', async () => {
    const { limiter } = limiterOf()
    jest.setSystemTime(T0 + 800)
    const { decisions, all } = waiters(limiter, 20, { maxWaitMs: 300 })
    await jest.advanceTimersByTimeAsync(300)
    await all
    expect(decisions.map((d) => d.allowed)).toEqual(Array.from({ length: 20 }, (_, i) => i < 10))
    expect(decisions.slice(5, 10).every((d) => d.at === T0 + 1000)).toBe(true)
  })

  it('resolves at once, counting nothing, when the signal is already aborted', async () => {
    const { limiter, tries } = limiterOf()
    const d = await limiter.wait('job', { maxWaitMs: 60_000, signal: AbortSignal.abort() })
    expect(d).toMatchObject({ allowed: false, count: 0, cost: 1, key: 'job', limit: 5 })
    expect(tries).toHaveLength(0)
    expect((await limiter.peek('job')).count).toBe(0)
    expect(jest.getTimerCount()).toBe(0)
  })

  it('ends a wait when its signal aborts, head or not, and serves the waiters behind it in order', async () => {
    const { limiter } = limiterOf()
    for (let i = 0; i < 5; i++) limiter.consume('job')
    const head = new AbortController()
    const middle = new AbortController()
    const order: string[] = []
    const a = limiter.wait('job', { maxWaitMs: 60_000, signal: head.signal }).then((d) => order.push(`a:${d.allowed}`))
    const b = limiter.wait('job', { maxWaitMs: 60_000, signal: middle.signal }).then((d) => order.push(`b:${d.allowed}`))
    const c = limiter.wait('job', { maxWaitMs: 60_000 }).then((d) => order.push(`c:${d.allowed}`))
    await jest.advanceTimersByTimeAsync(100)
    middle.abort()
    await b
    expect(order).toEqual(['b:false'])
    head.abort()
    await a
    expect(order).toEqual(['b:false', 'a:false'])
    expect(getEventListeners(head.signal, 'abort')).toHaveLength(0)
    await jest.advanceTimersByTimeAsync(900)
    await c
    expect(order).toEqual(['b:false', 'a:false', 'c:true'])
    expect(jest.getTimerCount()).toBe(0)
  })

  it('leaves no timer, queue or abort listener behind once every waiter is gone', async () => {
    const { limiter } = limiterOf({ window: '1m' })
    const shared = new AbortController()
    const { all } = waiters(limiter, 8, { maxWaitMs: 5000, signal: shared.signal }, 'a')
    const others = Array.from({ length: 3 }, (_, i) => limiter.wait(`b${i}`, { maxWaitMs: 60_000, cost: 6, signal: shared.signal }))
    for (let i = 0; i < 3; i++) limiter.wait(`c${i}`, { maxWaitMs: 60_000, signal: shared.signal })
    // Only a has a queue, of the 3 waits the limit did not admit at once: the b waits were refused after
    // one try (a cost no limit admits) and the c waits admitted at once, so their queues went with them.
    expect(queues(limiter)).toEqual({ size: 3, keys: 1 })
    expect(getEventListeners(shared.signal, 'abort')).toHaveLength(3)
    expect((await Promise.all(others)).map((d) => d.allowed)).toEqual([false, false, false])
    await jest.advanceTimersByTimeAsync(5000)
    expect((await all).map((d) => d.allowed)).toEqual([true, true, true, true, true, false, false, false])
    expect(queues(limiter)).toEqual({ size: 0, keys: 0 })
    expect(getEventListeners(shared.signal, 'abort')).toHaveLength(0)
    expect(jest.getTimerCount()).toBe(0)
  })

  it('ends waits that time out together in arrival order, even when a deadline timer fires before the clock reaches it', async () => {
    let lag = 0
    const { limiter } = limiterOf({ clock: () => Date.now() - lag })
    for (let i = 0; i < 5; i++) limiter.consume('job')
    const order: string[] = []
    const a = limiter.wait('job', { maxWaitMs: 300 }).then(() => order.push('a'))
    await jest.advanceTimersByTimeAsync(1)
    const b = limiter.wait('job', { maxWaitMs: 300 }).then(() => order.push('b'))
    lag = 1 // a's timer fires at 300 while the clock reads 299: a waits 1 ms more, until b's deadline
    await jest.advanceTimersByTimeAsync(299)
    lag = 0
    await jest.advanceTimersByTimeAsync(1)
    await Promise.all([a, b])
    expect(order).toEqual(['a', 'b'])
  })

  it('refuses a cost no limit admits after one try, without waiting', async () => {
    const { limiter, tries } = limiterOf()
    expect(await limiter.wait('job', { maxWaitMs: 5000, cost: 6 })).toMatchObject({ allowed: false, cost: 6, at: T0 })
    expect(tries).toHaveLength(1)
    expect(jest.getTimerCount()).toBe(0)
  })

  it('holds later waiters behind an earlier one of a larger cost', async () => {
    const { limiter } = limiterOf()
    limiter.consume('job', 3)
    const order: string[] = []
    const big = limiter.wait('job', { maxWaitMs: 5000, cost: 4 }).then((d) => order.push(`big@${d.at - T0}`))
    const small = limiter.wait('job', { maxWaitMs: 5000 }).then((d) => order.push(`small@${d.at - T0}`))
    await jest.advanceTimersByTimeAsync(1000)
    await Promise.all([big, small])
    expect(order).toEqual(['big@1000', 'small@1000'])
  })
})

describe.each<AlgorithmName>(['sliding-window', 'gcra', 'sliding-log'])('limiter.wait with %s', (algorithm) => {
  // The sliding window's estimate admits about 4 a second once the previous window is full, so its 20
  // take nearly 5 s; the others admit 5 a second.
  const within = algorithm === 'sliding-window' ? 5000 : 4000

  it(`admits 20 waiters in arrival order within ${within / 1000} s, trying again only when a refusal said a try could pass`, async () => {
    const { limiter, tries } = limiterOf({ algorithm })
    const { settled, decisions, all } = waiters(limiter, 20, { maxWaitMs: 10_000 })
    await jest.advanceTimersByTimeAsync(within)
    expect(settled).toHaveLength(20)
    await all
    expect(settled).toEqual(Array.from({ length: 20 }, (_, i) => i))
    expect(decisions.every((d) => d.allowed && d.at < T0 + within)).toBe(true)
    for (let i = 1; i < tries.length; i++) {
      const before = tries[i - 1]!
      if (!before.allowed) expect(tries[i]!.at).toBeGreaterThanOrEqual(before.at + before.retryAfterMs)
    }
    expect(tries.filter((d) => !d.allowed).length).toBeLessThanOrEqual(20)
  })
})

describe('limiter.wait arguments', () => {
  it.each<[string, unknown, unknown, RegExp]>([
    ['an empty key', '', { maxWaitMs: 10 }, /Invalid argument "key" of wait\(\): expected a non-empty string, got "" \(string\)/],
    ['a key that is not a string', 42, { maxWaitMs: 10 }, /"key".*got 42 \(number\)/],
    ['no options', 'k', undefined, /Invalid argument "options" of wait\(\): expected an object with maxWaitMs, got undefined/],
    ['no maxWaitMs', 'k', {}, /Invalid option "maxWaitMs": expected a whole number of ms from 0 to 2147483647, got undefined/],
    ['a negative maxWaitMs', 'k', { maxWaitMs: -1 }, /"maxWaitMs".*got -1 \(number\)/],
    ['an infinite maxWaitMs', 'k', { maxWaitMs: Number.POSITIVE_INFINITY }, /"maxWaitMs".*got Infinity \(number\)/],
    ['a maxWaitMs as a duration string', 'k', { maxWaitMs: '5s' }, /"maxWaitMs".*got "5s" \(string\)/],
    ['a fractional cost', 'k', { maxWaitMs: 10, cost: 1.5 }, /Invalid option "cost": expected a whole number ≥ 0, got 1.5 \(number\)/],
    ['a bad max', 'k', { maxWaitMs: 10, max: -2 }, /Invalid option "max".*got -2 \(number\)/],
    ['a signal that is not one', 'k', { maxWaitMs: 10, signal: true }, /Invalid option "signal": expected an AbortSignal, got true/],
    ['a misspelt option', 'k', { maxWait: 10 }, /Unknown wait\(\) option "maxWait" \(did you mean "maxWaitMs"\?\)/],
  ])('rejects %s with a TollgateError naming it', async (_what, key, options, message) => {
    const { limiter, tries } = limiterOf()
    const wait = limiter.wait as (key: unknown, options: unknown) => Promise<Decision>
    await expect(wait.call(limiter, key, options)).rejects.toThrow(message)
    await expect(wait.call(limiter, key, options)).rejects.toMatchObject({ name: 'TollgateError' })
    expect(tries).toHaveLength(0)
    expect(queues(limiter).keys).toBe(0)
  })

  it("needs a max when the limiter's max is a function, and waits with the one given", async () => {
    const { limiter } = limiterOf({ max: () => 5 })
    await expect(limiter.wait('k', { maxWaitMs: 10 })).rejects.toThrow(/needs a max/)
    const d = await limiter.wait('k', { maxWaitMs: 10, max: 2, cost: 2 })
    expect(d).toMatchObject({ allowed: true, limit: 2, remaining: 0 })
  })
})
