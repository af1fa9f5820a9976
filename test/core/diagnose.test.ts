import { Limiter } from '@tollgate/core'

// Request-time misconfiguration checks (the adapters' diagnose hooks): every request until one
// settles the setup, then, while requests say nothing either way, one in 16 after the first 1024.
describe('diagnosing request-time misconfigurations', () => {
  function limiterWith(problem: () => string | null | undefined) {
    const warnings: string[] = []
    let calls = 0
    const limiter = new Limiter<{ ip: string }>(
      { max: 1e9, logger: { warn: (m: string) => warnings.push(m), error: () => {} } },
      {
        ip: (r) => r.ip,
        diagnose: () => {
          calls++
          return problem()
        },
      },
    )
    return { limiter, warnings, calls: () => calls }
  }

  it('looks at each of the first 1024 requests, then one in 16, and still finds a problem that shows late', () => {
    let spoofed = false
    const { limiter, warnings, calls } = limiterWith(() => (spoofed ? 'a request carried a spoofed header' : undefined))
    for (let i = 0; i < 1024; i++) limiter.check({ ip: '192.0.2.1' })
    expect(calls()).toBe(1024)
    for (let i = 0; i < 160; i++) limiter.check({ ip: '192.0.2.1' })
    expect(calls()).toBe(1024 + 10)
    expect(warnings).toEqual([])

    spoofed = true
    for (let i = 0; i < 16; i++) limiter.check({ ip: '192.0.2.1' })
    expect(warnings).toEqual(['Tollgate: a request carried a spoofed header'])
    // Settled: never asked again.
    const after = calls()
    for (let i = 0; i < 100; i++) limiter.check({ ip: '192.0.2.1' })
    expect(calls()).toBe(after)
    expect(warnings).toHaveLength(1)
  })

  it('stops at the first request that shows the setup is sound (null)', () => {
    const { limiter, calls } = limiterWith(() => null)
    for (let i = 0; i < 10; i++) limiter.check({ ip: '192.0.2.1' })
    expect(calls()).toBe(1)
  })
})
