import { type Decision, ipKey, Limiter, type Logger } from '@tollgate/core'

describe('client keys from IP addresses', () => {
  it('keeps IPv4 as it is', () => {
    expect(ipKey('203.0.113.7', 56)).toBe('203.0.113.7')
  })

  it('folds IPv4-mapped IPv6 to the IPv4 address, so dual-stack sockets see one client', () => {
    expect(ipKey('::ffff:203.0.113.7', 56)).toBe('203.0.113.7')
    expect(ipKey('::FFFF:203.0.113.7', 56)).toBe('203.0.113.7')
    expect(ipKey('::ffff:cb00:7107', 56)).toBe('203.0.113.7')
  })

  it('never merges distinct IPv4 clients that arrive as IPv4-mapped IPv6', () => {
    const keys = new Set(['::ffff:10.0.0.1', '::ffff:10.0.0.2', '::ffff:10.0.1.1', '::ffff:192.168.0.1'].map((ip) => ipKey(ip, 56)))
    expect(keys.size).toBe(4)
  })

  it('groups IPv6 by the configured subnet, so rotating inside a /64 stays one bucket', () => {
    const a = ipKey('2001:db8:abcd:12ff:1111:2222:3333:4444', 64)
    const b = ipKey('2001:db8:abcd:12ff:ffff:ffff:ffff:ffff', 64)
    expect(a).toBe('2001:db8:abcd:12ff::/64')
    expect(b).toBe(a)
    expect(ipKey('2001:db8:abcd:1300::1', 64)).not.toBe(a)
  })

  it('groups by /56 by default shape, masking inside a group', () => {
    expect(ipKey('2001:db8:abcd:12ff::1', 56)).toBe('2001:db8:abcd:1200::/56')
    expect(ipKey('2001:db8:abcd:1234::1', 56)).toBe('2001:db8:abcd:1200::/56')
  })

  it('keys on the full address when grouping is off', () => {
    expect(ipKey('2001:db8::1', false)).toBe('2001:db8:0:0:0:0:0:1')
  })

  it('drops a zone index', () => {
    expect(ipKey('fe80::1%eth0', 128)).toBe('fe80:0:0:0:0:0:0:1')
  })

  it('returns undefined for a missing or unusable address', () => {
    expect(ipKey(undefined, 56)).toBeUndefined()
    expect(ipKey('', 56)).toBeUndefined()
    expect(ipKey('not-an-ip', 56)).toBeUndefined()
  })
})

describe('the IPv4 fast path', () => {
  it.each(['0.0.0.0', '255.255.255.255', '10.0.0.1', '192.168.100.200'])('accepts %s as node:net does', (ip) => {
    expect(ipKey(ip, 56)).toBe(ip)
  })
  it.each(['256.0.0.1', '1.2.3', '1.2.3.4.5', '01.2.3.4', '1..2.3', '1.2.3.', 'a.b.c.d', '1.2.3.1000'])(
    'rejects %s as node:net does',
    (ip) => {
      expect(ipKey(ip, 56)).toBeUndefined()
    },
  )
})

describe("a limiter's IP keys, request after request", () => {
  const quiet: Logger = { warn: () => {}, error: () => {} }
  const limiterByIp = () => new Limiter<{ ip?: string }>({ max: 100, logger: quiet }, { ip: (req) => req.ip })

  it('keys each request by its own address, whatever came before it (the last address is remembered)', () => {
    const limiter = limiterByIp()
    const socketAddress = '::ffff:203.0.113.7'
    const keyOf = (ip: string | undefined) => (limiter.check({ ip }) as Decision).key
    expect(keyOf(socketAddress)).toBe('203.0.113.7')
    expect(keyOf(socketAddress)).toBe('203.0.113.7')
    expect(keyOf('2001:db8:abcd:12ff::1')).toBe('2001:db8:abcd:1200::/56')
    expect(keyOf(['::ffff:', '203.0.113.7'].join(''))).toBe('203.0.113.7')
    expect(keyOf(undefined)).toBe('unknown-ip')
    expect(keyOf('not-an-ip')).toBe('unknown-ip')
    expect(keyOf('10.0.0.1')).toBe('10.0.0.1')
    expect(keyOf(socketAddress)).toBe('203.0.113.7')
  })

  it('counts two clients that alternate apart', () => {
    const limiter = limiterByIp()
    let last: Decision | undefined
    for (let i = 0; i < 6; i++) last = limiter.check({ ip: i % 2 === 0 ? '10.0.0.1' : '10.0.0.2' }) as Decision
    expect(last?.key).toBe('10.0.0.2')
    expect(last?.count).toBe(3)
  })
})
