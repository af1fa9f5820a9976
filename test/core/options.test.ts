import { Limiter, MemoryStore, parseDuration, TollgateError } from '@tollgate/core'
import { nestedOptions } from '@tollgate/core/adapter'
import { LIMIT_DEFINING_KEYS } from '../../packages/core/src/options/nested-options'

describe('options are validated once, at construction', () => {
  // Every option, each with wrong types and values: the error names the option and the value.
  const bad: Array<[string, unknown, RegExp]> = [
    ['max', -1, /"max".*-1 \(number\)/],
    ['lease', 1, /"lease".*1 \(number\)/],
    ['max', 1.5, /"max".*1\.5 \(number\)/],
    ['max', '10', /"max".*"10" \(string\)/],
    ['max', Number.NaN, /"max".*NaN \(number\)/],
    ['max', null, /"max".*null/],
    ['window', -5, /"window": expected a positive whole number of ms or a duration like "1s".*got -5 \(number\)/],
    ['window', 0, /"window".*0 \(number\)/],
    ['window', '1 fortnight', /"window".*"1 fortnight" \(string\)/],
    ['window', '', /"window".*"" \(string\)/],
    ['window', 1.5, /"window".*1\.5/],
    ['window', {}, /"window".*\(object\)/],
    ['key', 'ip', /"key".*"ip" \(string\)/],
    ['prefix', 42, /"prefix".*42 \(number\)/],
    ['prefix', 'tg:{x}:', /"prefix".*braces/],
    ['prefix', 'a b', /"prefix"/],
    ['store', {}, /"store".*\{\} \(object\)/],
    ['store', 'redis', /"store".*"redis" \(string\)/],
    ['cost', -2, /"cost".*-2 \(number\)/],
    ['cost', '1', /"cost".*"1" \(string\)/],
    ['skip', true, /"skip".*true \(boolean\)/],
    ['headers', 'draft-9', /"headers".*"draft-9" \(string\)/],
    ['headers', 1, /"headers".*1 \(number\)/],
    ['legacyHeaders', 'yes', /"legacyHeaders".*"yes" \(string\)/],
    ['headersOn', 'never', /"headersOn".*"never" \(string\)/],
    ['refusalHeaders', 1, /"refusalHeaders".*1 \(number\)/],
    ['allowList', '10.0.0.0/8', /"allowList".*"10.0.0.0\/8" \(string\)/],
    ['allowList', [''], /"allowList\[0\]".*"" \(string\)/],
    ['denyList', ['10.0.0.0/33'], /"denyList\[0\]".*prefix length from 0 to 32.*"10.0.0.0\/33"/],
    ['denyList', ['not-an-ip/8'], /"denyList\[0\]".*CIDR range.*"not-an-ip\/8"/],
    ['denyList', [5], /"denyList\[0\]".*5 \(number\)/],
    ['denyStatusCode', 200, /"denyStatusCode".*200 \(number\)/],
    ['denyMessage', 5, /"denyMessage".*5 \(number\)/],
    ['blockDuration', -1, /"blockDuration".*-1 \(number\)/],
    ['statusCode', 200, /"statusCode".*200 \(number\)/],
    ['statusCode', '429', /"statusCode".*"429" \(string\)/],
    ['message', 42, /"message".*42 \(number\)/],
    ['message', [1], /"message".*array/],
    ['ipv6Subnet', 0, /"ipv6Subnet".*0 \(number\)/],
    ['ipv6Subnet', 129, /"ipv6Subnet".*129/],
    ['ipv6Subnet', true, /"ipv6Subnet".*true/],
    ['onStoreError', 'ignore', /"onStoreError".*"ignore" \(string\)/],
    ['name', 'a"b', /"name"/],
    ['name', '', /"name"/],
    ['logger', {}, /"logger".*\(object\)/],
    ['meterProvider', {}, /"meterProvider": expected an OpenTelemetry MeterProvider.*\{\} \(object\)/],
    ['meterProvider', null, /"meterProvider".*null/],
    ['clock', 5, /"clock".*5 \(number\)/],
    [
      'algorithm',
      'leaky-bucket',
      /"algorithm": expected "fixed-window", "sliding-window", "gcra", "sliding-log", "concurrency", got "leaky-bucket"/,
    ],
    ['limits', [], /"limits".*an array of 0/],
    ['limits', [{ max: 'x', window: '1s' }], /"limits\[0\]\.max".*"x" \(string\)/],
    ['limits', [{ max: 1, window: '1 fortnight' }], /"limits\[0\]\.window".*"1 fortnight"/],
    ['limits', [{ max: 1, window: '1s', windowMs: 5 }], /"limits\[0\]\.windowMs"/],
    [
      'limits',
      [
        { max: 1, window: '1s' },
        { max: 2, window: 1000 },
      ],
      /"limits".*distinct windows/,
    ],
    ['limits', [{ max: 1, window: '1s', key: 'tenant' }], /"limits\[0\]\.key".*"tenant" \(string\)/],
    ['hashTag', 'tenant', /"hashTag".*"tenant" \(string\)/],
    ['hashTag', () => 't', /"hashTag": expected no hashTag unless a limit has a key of its own/],
    ['burst', 0, /"burst".*0 \(number\)/],
    ['burst', 5, /"burst": expected no burst unless algorithm is "gcra"/],
    ['skipFailedRequests', 'yes', /"skipFailedRequests".*"yes"/],
    ['skipSuccessfulRequests', 1, /"skipSuccessfulRequests".*1 \(number\)/],
    ['requestWasSuccessful', true, /"requestWasSuccessful".*true \(boolean\)/],
    ['actualCost', 'x-tokens', /"actualCost".*"x-tokens" \(string\)/],
    ['shadow', 'on', /"shadow".*"on" \(string\)/],
  ]

  it.each(bad)('rejects %s = %p with an error naming the option and the value', (name, value, pattern) => {
    let error: unknown
    try {
      new Limiter({ [name]: value })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(TollgateError)
    expect((error as TollgateError).code).toBe('TG_INVALID_OPTION')
    expect((error as Error).message).toMatch(pattern)
    expect((error as Error).message).toMatch(/\[TG_INVALID_OPTION\]$/)
  })

  it('covers every option the limiter knows', () => {
    const tested = new Set(bad.map(([name]) => name))
    // The unknown-option error lists the known options: compare against the table.
    let message = ''
    try {
      new Limiter({ nope: 1 } as never)
    } catch (e) {
      message = (e as Error).message
    }
    const known = message
      .replace(/.*known options: /, '')
      .replace(/ \[.*$/, '')
      .split(', ')
    expect(known.length).toBeGreaterThan(10)
    for (const name of known) expect(tested).toContain(name)
  })

  it('rejects an unknown option and suggests the one that was meant', () => {
    expect(() => new Limiter({ windowMS: 1000 } as never)).toThrow(
      /Unknown option "windowMS" \(did you mean "window"\?\).*\[TG_UNKNOWN_OPTION\]/,
    )
    expect(() => new Limiter({ limit: 5 } as never)).toThrow(/Unknown option "limit"/)
  })

  // Options carried over from express-rate-limit, @fastify/rate-limit, koa-ratelimit,
  // rate-limiter-flexible and @nestjs/throttler are answered with Tollgate's name for them.
  it.each([
    ['windowMs', 'window'],
    ['timeWindow', 'window'],
    ['duration', 'window'],
    ['ttl', 'window'],
    ['limit', 'max'],
    ['points', 'max'],
    ['keyGenerator', 'key'],
    ['standardHeaders', 'headers'],
    ['passOnStoreError', 'onStoreError'],
    ['skipOnError', 'onStoreError'],
    ['keyPrefix', 'prefix'],
    ['nameSpace', 'prefix'],
    ['errorResponseBuilder', 'message'],
    ['redis', 'store'],
    ['driver', 'store'],
    ['whitelist', 'allowList'],
    ['ban', 'blockDuration'],
    ['blacklist', 'denyList'],
  ])('answers the peer option %s with "did you mean %s"', (peer, ours) => {
    expect(() => new Limiter({ [peer]: 1 } as never)).toThrow(new RegExp(`Unknown option "${peer}" \\(did you mean "${ours}"\\?\\)`))
  })

  it('rejects limits given together with max or window', () => {
    expect(() => new Limiter({ max: 5, limits: [{ max: 1, window: '1s' }] })).toThrow(/"limits": expected limits without max or window/)
  })

  it('rejects options that are not an object', () => {
    expect(() => new Limiter(5 as never)).toThrow(/"options"/)
  })

  it('fills defaults: 10 per second, draft-8 headers, 429, fallback on store errors', () => {
    const { config } = new Limiter()
    expect(config).toMatchObject({
      max: 10,
      windowMs: 1000,
      prefix: 'tg:',
      headers: 'draft-8',
      legacyHeaders: false,
      statusCode: 429,
      ipv6Subnet: 56,
      onStoreError: 'fallback',
    })
    expect(config.store).toBeInstanceOf(MemoryStore)
    expect(Object.isFrozen(config)).toBe(true)
  })

  it("never mutates the caller's options object", () => {
    const options = Object.freeze({ max: 3, window: '1 minute' as const })
    const { config } = new Limiter(options)
    expect(config.windowMs).toBe(60_000)
    expect(options).toEqual({ max: 3, window: '1 minute' })
  })

  it('treats undefined as "use the default"', () => {
    expect(new Limiter({ max: undefined, window: undefined }).config).toMatchObject({ max: 10, windowMs: 1000 })
  })
})

describe('durations', () => {
  it.each([
    [250, 250],
    ['500ms', 500],
    ['1s', 1000],
    ['1 second', 1000],
    ['2 seconds', 2000],
    ['1m', 60_000],
    ['1 minute', 60_000],
    ['15 minutes', 900_000],
    ['1h', 3_600_000],
    ['1 hour', 3_600_000],
    ['1d', 86_400_000],
    ['1.5s', 1500],
    ['1S', 1000],
  ])('parses %p as %d ms', (input, ms) => {
    expect(parseDuration('window', input)).toBe(ms)
  })

  it.each(['1', '1 fortnight', 's', '-1s', '0s', '0.0001s', 'Infinity'])('rejects %p', (input) => {
    expect(() => parseDuration('window', input)).toThrow(/Invalid option "window"/)
  })
})

describe('nested limits (a route limit under a plugin limit)', () => {
  const parent = {
    max: 100,
    window: '1m',
    limits: undefined,
    burst: 3,
    name: 'api',
    prefix: 'p:',
    shadow: true,
    cost: 2,
    headers: 'draft-7',
  }
  const nest = { parentPrefix: 'p:', scope: 'GET/login', option: 'config.rateLimit' }

  it("take the parent's way of counting but none of the numbers, name or prefix that define its limit", () => {
    const merged = nestedOptions(parent, { max: 5 }, nest)
    expect(merged).toEqual({ max: 5, cost: 2, headers: 'draft-7', prefix: 'p:GET/login:' })
    for (const key of LIMIT_DEFINING_KEYS) if (key !== 'max' && key !== 'prefix') expect(merged).not.toHaveProperty(key)
  })

  it('keep a prefix of their own when given one, and never change the objects passed in', () => {
    const own = { max: 5, prefix: 'login:' }
    expect(nestedOptions(parent, own, nest).prefix).toBe('login:')
    expect(own).toEqual({ max: 5, prefix: 'login:' })
    expect(parent.max).toBe(100)
  })

  it.each([[true], [5], ['5'], [null], [[{ max: 5 }]]])('reject %p as the nested options, naming the option', (own) => {
    expect(() => nestedOptions(parent, own, nest)).toThrow(/Invalid option "config\.rateLimit": expected an object of options or false/)
  })
})
