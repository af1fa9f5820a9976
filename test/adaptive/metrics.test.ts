import { AdaptiveFront, Permit } from '@tollgate/core/adapter'
import { TestMetrics } from '../support/metrics'

test('the gate reports its limit, requests in flight and waiting, and refusals by class, to the meterProvider', async () => {
  const m = new TestMetrics()
  try {
    const front = new AdaptiveFront<{ p: 'critical' | 'normal' | 'sheddable' }>({
      initialLimit: 4,
      minLimit: 4,
      maxLimit: 4,
      maxQueue: 1,
      queueTimeout: '30s',
      eventLoopUtilization: false,
      name: 'api',
      meterProvider: m.provider,
      priority: (req) => req.p,
    })
    const held = [1, 2, 3, 4].map(() => front.enter({ p: 'normal' }))
    const waiting = front.enter({ p: 'sheddable' })
    const refused = front.enter({ p: 'sheddable' })
    expect(held.every((h) => h instanceof Permit)).toBe(true)
    expect(refused).toMatchObject({ status: 503 })
    const gate = { 'tollgate.gate': 'api' }
    expect(await m.value('tollgate.adaptive.limit', gate)).toBe(4)
    expect(await m.value('tollgate.adaptive.inflight', gate)).toBe(4)
    expect(await m.value('tollgate.adaptive.queued', gate)).toBe(1)
    expect(await m.value('tollgate.adaptive.shed', { ...gate, 'tollgate.priority': 'sheddable' })).toBe(1)
    expect(await m.value('tollgate.adaptive.shed', { ...gate, 'tollgate.priority': 'critical' })).toBe(0)
    for (const h of held) (h as Permit).release()
    expect(await waiting).toBeInstanceOf(Permit)
    expect(await m.value('tollgate.adaptive.queued', gate)).toBe(0)
  } finally {
    await m.shutdown()
  }
})
