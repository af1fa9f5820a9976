import { type Decision, Limiter, rateLimitHeaders } from '@tollgate/core'
import { lowerHeaderName } from '@tollgate/core/adapter'
import { type Item, parseDictionary, parseList } from 'structured-headers'

function decisions(options: ConstructorParameters<typeof Limiter>[0], at: number, n: number): Decision[] {
  const limiter = new Limiter({ ...options, clock: () => at, key: () => 'client' })
  const out: Decision[] = []
  for (let i = 0; i < n; i++) out.push(limiter.check({}) as Decision)
  return out
}

/** Parses a structured-field list and returns its members as name → parameters. */
function members(field: string): Map<string, Map<string, unknown>> {
  const out = new Map<string, Map<string, unknown>>()
  for (const member of parseList(field)) {
    const [value, params] = member as Item
    out.set(String(value), params)
  }
  return out
}

describe('RateLimit headers, latest draft (structured fields)', () => {
  const at = 1_763_729_100_250 // 250 ms into a second

  it('reuses one refusal record per policy within a second, and never one from an earlier second', () => {
    let now = at
    const limiter = new Limiter({ max: 2, window: '1m', clock: () => now, key: () => 'client' })
    const refuse = () => rateLimitHeaders([limiter.check({}) as Decision], 'draft-8', false)
    limiter.check({})
    limiter.check({})
    const first = refuse()
    expect(first).toEqual({
      'RateLimit-Policy': '"2-per-1m";q=2;w=60',
      RateLimit: '"2-per-1m";r=0;t=60',
      'Retry-After': '60',
      'Cache-Control': 'no-store',
    })
    expect(refuse()).toBe(first) // the same frozen record
    expect(Object.isFrozen(first)).toBe(true)
    now += 1000 // a second later: 59 s left
    const later = refuse()
    expect(later.RateLimit).toBe('"2-per-1m";r=0;t=59')
    expect(later['Retry-After']).toBe('59')
    now += 500
    expect(refuse()).toBe(later) // 58.25 s left still rounds up to 59
  })

  it('describes the policy and what is left, as structured-field lists', () => {
    const d = decisions({ max: 10 }, at, 7)
    const headers = rateLimitHeaders([d[6]!], 'draft-8', false)
    expect(headers['RateLimit-Policy']).toBe('"10-per-1s";q=10;w=1')
    expect(headers.RateLimit).toBe('"10-per-1s";r=3;t=1')
    const policy = members(headers['RateLimit-Policy']!).get('10-per-1s')!
    expect(policy.get('q')).toBe(10)
    expect(policy.get('w')).toBe(1)
    const state = members(headers.RateLimit!).get('10-per-1s')!
    expect(state.get('r')).toBe(3)
    expect(state.get('t')).toBe(1)
    expect(headers['Retry-After']).toBeUndefined()
  })

  it('adds Retry-After and Cache-Control: no-store on a refusal, never earlier than the reset', () => {
    const d = decisions({ max: 2, window: '1 minute' }, at, 3)
    const refused = d[2]!
    expect(refused.allowed).toBe(false)
    const headers = rateLimitHeaders([refused], 'draft-8', false)
    const secondsLeft = (refused.resetAt - at) / 1000
    expect(Number(headers['Retry-After'])).toBe(Math.ceil(secondsLeft))
    expect(Number(headers['Retry-After']) * 1000).toBeGreaterThanOrEqual(refused.resetAt - at)
    expect(headers['Cache-Control']).toBe('no-store')
    const state = members(headers.RateLimit!).get('2-per-1m')!
    expect(state.get('r')).toBe(0)
    expect(state.get('t')).toBe(Math.ceil(secondsLeft))
  })

  it('lists one member per limit when several apply, with distinct names', () => {
    const perSecond = decisions({ max: 10 }, at, 4)[3]!
    const perMinute = decisions({ max: 100, window: '1m' }, at, 40)[39]!
    const sameShape = decisions({ max: 10 }, at, 1)[0]!
    const headers = rateLimitHeaders([perSecond, perMinute, sameShape], 'draft-8', false)
    const policies = members(headers['RateLimit-Policy']!)
    expect([...policies.keys()]).toEqual(['10-per-1s', '100-per-1m', '10-per-1s-2'])
    expect(policies.get('100-per-1m')!.get('w')).toBe(60)
    const state = members(headers.RateLimit!)
    expect(state.get('10-per-1s')!.get('r')).toBe(6)
    expect(state.get('100-per-1m')!.get('r')).toBe(60)
    expect(state.get('10-per-1s-2')!.get('r')).toBe(9)
  })

  it('renders draft-7 as a policy list and one combined dictionary for the most restrictive limit', () => {
    const a = decisions({ max: 10 }, at, 4)[3]!
    const b = decisions({ max: 100, window: '1m' }, at, 99)[98]!
    const headers = rateLimitHeaders([a, b], 'draft-7', false)
    expect(headers['RateLimit-Policy']).toBe('10;w=1, 100;w=60')
    const dict = parseDictionary(headers.RateLimit!)
    expect(dict.get('limit')?.[0]).toBe(100)
    expect(dict.get('remaining')?.[0]).toBe(1)
    expect(typeof dict.get('reset')?.[0]).toBe('number')
  })

  it('renders draft-6 as separate limit, remaining and reset fields', () => {
    const d = decisions({ max: 5 }, at, 2)[1]!
    expect(rateLimitHeaders([d], 'draft-6', false)).toEqual({
      'RateLimit-Policy': '5;w=1',
      'RateLimit-Limit': '5',
      'RateLimit-Remaining': '3',
      'RateLimit-Reset': '1',
    })
  })

  it('adds the legacy X-RateLimit fields with the reset in epoch seconds when asked', () => {
    const d = decisions({ max: 5 }, at, 1)[0]!
    const headers = rateLimitHeaders([d], false, true)
    expect(headers).toEqual({
      'X-RateLimit-Limit': '5',
      'X-RateLimit-Remaining': '4',
      'X-RateLimit-Reset': String(Math.ceil(d.resetAt / 1000)),
    })
  })

  it('sends no rate-limit fields when headers are off, but still says when to retry', () => {
    const refused = decisions({ max: 1 }, at, 2)[1]!
    expect(rateLimitHeaders([refused], false, false)).toEqual({ 'Retry-After': '1', 'Cache-Control': 'no-store' })
  })
})

describe('lowerHeaderName (what the fastify adapter writes)', () => {
  it('gives every field name of every header style in lower case, and other names lower-cased too', () => {
    const at = 1_700_000_000_500
    const [allowed, refused] = decisions({ max: 1 }, at, 2)
    const names = new Set<string>()
    for (const style of ['draft-8', 'draft-7', 'draft-6', false] as const) {
      for (const legacy of [false, true]) {
        for (const d of [allowed!, refused!]) for (const name of Object.keys(rateLimitHeaders([d], style, legacy))) names.add(name)
      }
    }
    // The records use ten names; each must map to its own lower case (a typo in the table would not).
    expect(names.size).toBe(10)
    for (const name of names) expect(lowerHeaderName(name)).toBe(name.toLowerCase())
    expect(lowerHeaderName('X-Custom-Field')).toBe('x-custom-field')
  })
})
