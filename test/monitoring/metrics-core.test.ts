import { createNoopMeter, metrics } from '@opentelemetry/api'
import { type Decision, Limiter, MemoryStore } from '@tollgate/core'
import { sumWhere, TestMetrics } from '../support/metrics'

// The metrics and the `decision` event on the memory store, with the limiter's clock injected. The
// global MeterProvider is this file's own (jest gives each test file its own global object).
const quiet = { warn: () => {}, error: () => {} }
const T0 = 1_763_729_100_000
const providers: TestMetrics[] = []

function sdk(): TestMetrics {
  const m = new TestMetrics()
  providers.push(m)
  return m
}

afterEach(async () => {
  metrics.disable()
  jest.restoreAllMocks()
  for (const m of providers.splice(0)) await m.shutdown()
})

/** Lets `@opentelemetry/api`, which a limiter loads with import(), finish loading. */
const loaded = () => new Promise((resolve) => setImmediate(resolve))

describe('OpenTelemetry metrics', () => {
  it('records into the meterProvider option: outcomes allowed, limited, shadowed and denied, and each store operation', async () => {
    const m = sdk()
    const store = new MemoryStore()
    const limiter = new Limiter({ max: 2, name: 'api', store, meterProvider: m.provider, logger: quiet, clock: () => T0 })
    for (let i = 0; i < 3; i++) limiter.consume('a')
    limiter.peek('a')
    limiter.reset('a')
    const shadow = new Limiter({ max: 1, name: 'shadow', shadow: true, store, prefix: 's:', meterProvider: m.provider, logger: quiet })
    shadow.consume('b')
    shadow.consume('b')
    const lists = new Limiter(
      { max: 1, name: 'lists', denyList: ['192.0.2.1'], store, prefix: 'l:', meterProvider: m.provider, logger: quiet },
      { ip: () => '192.0.2.1' },
    )
    lists.check({})

    const read = await m.read()
    const decisions = read.get('tollgate.decisions') ?? []
    expect(sumWhere(decisions, { 'tollgate.policy': 'api', 'tollgate.outcome': 'allowed', 'tollgate.source': 'store' })).toBe(2)
    expect(sumWhere(decisions, { 'tollgate.policy': 'api', 'tollgate.outcome': 'limited', 'tollgate.source': 'store' })).toBe(1)
    expect(sumWhere(decisions, { 'tollgate.policy': 'shadow', 'tollgate.outcome': 'allowed' })).toBe(1)
    expect(sumWhere(decisions, { 'tollgate.policy': 'shadow', 'tollgate.outcome': 'shadowed', 'tollgate.source': 'store' })).toBe(1)
    expect(sumWhere(decisions, { 'tollgate.policy': 'lists', 'tollgate.outcome': 'denied', 'tollgate.source': 'deny_list' })).toBe(1)
    // peek is not a decision: 2 + 1 + 2 + 1.
    expect(sumWhere(decisions, {})).toBe(6)

    const durations = read.get('tollgate.store.duration') ?? []
    expect(sumWhere(durations, { 'tollgate.operation': 'increment', 'tollgate.outcome': 'ok' })).toBe(5)
    expect(sumWhere(durations, { 'tollgate.operation': 'admit', 'tollgate.outcome': 'ok' })).toBe(1) // the peek
    expect(sumWhere(durations, { 'tollgate.operation': 'forget', 'tollgate.outcome': 'ok' })).toBe(1)
    expect(sumWhere(read.get('tollgate.store.degraded_nodes') ?? [], { 'tollgate.prefix': 'tg:' })).toBe(0)
  })

  it('times the lockout reads and writes, and a store call that fails', async () => {
    const m = sdk()
    const store = new MemoryStore()
    const limiter = new Limiter({ max: 1, blockDuration: '1 minute', store, meterProvider: m.provider, logger: quiet, clock: () => T0 })
    limiter.consume('a')
    limiter.consume('a') // refused: the block is written
    const durations = (await m.read()).get('tollgate.store.duration') ?? []
    expect(sumWhere(durations, { 'tollgate.operation': 'blocked_until', 'tollgate.outcome': 'ok' })).toBe(2)
    expect(sumWhere(durations, { 'tollgate.operation': 'block', 'tollgate.outcome': 'ok' })).toBe(1)

    jest.spyOn(store, 'forget').mockImplementation(() => {
      throw new Error('disk on fire')
    })
    expect(() => limiter.reset('a')).toThrow('disk on fire')
    expect(await m.value('tollgate.store.duration', { 'tollgate.operation': 'forget', 'tollgate.outcome': 'error' })).toBe(1)
  })

  it('follows the global MeterProvider, registered after the limiter was made, from its next look (once a second)', async () => {
    let now = T0
    const limiter = new Limiter({ max: 100, logger: quiet, clock: () => now })
    await loaded()
    for (let i = 0; i < 3; i++) limiter.consume('a') // no SDK registered: recorded nowhere
    const m = sdk()
    metrics.setGlobalMeterProvider(m.provider)
    now += 1000
    limiter.consume('a')
    limiter.consume('a')
    expect(await m.value('tollgate.decisions', { 'tollgate.outcome': 'allowed', 'tollgate.policy': '100-per-1s' })).toBe(2)

    // Replaced: the next look moves the instruments to the new provider.
    metrics.disable()
    const next = sdk()
    metrics.setGlobalMeterProvider(next.provider)
    now += 1000
    limiter.consume('a')
    expect(await next.value('tollgate.decisions', {})).toBe(1)
    expect(await m.value('tollgate.decisions', {})).toBe(2)
  })

  it("makes no instrument and no instrument call while the global provider is the API's no-op one", async () => {
    const noop = createNoopMeter()
    const created = [jest.spyOn(noop, 'createCounter'), jest.spyOn(noop, 'createHistogram'), jest.spyOn(noop, 'createObservableGauge')]
    let now = T0
    const limiter = new Limiter({ max: 100, logger: quiet, clock: () => now })
    await loaded()
    for (let i = 0; i < 5; i++) {
      limiter.consume('a')
      now += 1000
    }
    for (const spy of created) expect(spy).not.toHaveBeenCalled()
  })
})

describe('the decision event', () => {
  it('is emitted once for every decision of check and consume, denied ones too, and not for peek', async () => {
    const limiter = new Limiter({ max: 1, denyList: ['192.0.2.1'], logger: quiet, clock: () => T0 }, { ip: () => '192.0.2.1' })
    const seen: Decision[] = []
    const listener = (d: Decision) => void seen.push(d)
    limiter.on('decision', listener)
    limiter.consume('a')
    limiter.consume('a')
    limiter.peek('a')
    limiter.check({})
    expect(seen.map((d) => [d.key, d.allowed, d.source])).toEqual([
      ['a', true, 'store'],
      ['a', false, 'store'],
      ['192.0.2.1', false, 'denyList'],
    ])
    limiter.off('decision', listener)
    limiter.consume('b')
    expect(seen).toHaveLength(3)
  })

  it('carries the final decision of a lockout, and async decisions once settled', async () => {
    const limiter = new Limiter({ max: 1, blockDuration: '1 minute', logger: quiet, clock: () => T0, key: async () => 'k' })
    const seen: Decision[] = []
    limiter.on('decision', (d: Decision) => void seen.push({ ...d }))
    await limiter.check({})
    const refused = await limiter.check({})
    expect(seen).toHaveLength(2)
    expect(seen[1]).toMatchObject({ allowed: false, retryAfterMs: 60_000 })
    expect(seen[1]!.resetAt).toBe(refused!.resetAt)
  })

  it('is emitted again for a listener added after removeAllListeners()', () => {
    const limiter = new Limiter({ max: 5, logger: quiet })
    let count = 0
    limiter.on('decision', () => count++)
    limiter.removeAllListeners()
    limiter.consume('a')
    expect(count).toBe(0)
    limiter.once('decision', () => count++)
    limiter.consume('a')
    limiter.consume('a')
    expect(count).toBe(1)
  })
})
