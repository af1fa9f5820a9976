import { Limiter } from '@tollgate/core'

// allowList / denyList entries: IPv4 and IPv6 addresses and CIDR ranges, matched on the client IP
// (IPv4-mapped IPv6 folded to IPv4), and other strings matched on the client key.

const list = ['203.0.113.0/24', '2001:db8::/32', '198.51.100.7', '::ffff:192.0.2.0/120', 'fe80::1', 'tenant-42']

/** A limiter whose deny list is `list`; whether a request from `ip` (with client key `key`) is denied. */
function denied(ip: string | undefined, key?: string): boolean {
  const limiter = new Limiter<{ ip?: string; key?: string }>(
    { denyList: list, max: 100, ...(key === undefined ? {} : { key: (r) => r.key! }) },
    { ip: (r) => r.ip },
  )
  return (limiter.check({ ip, key }) as { denied?: boolean }).denied === true
}

describe('client lists', () => {
  it.each([
    ['203.0.113.0', true],
    ['203.0.113.255', true],
    ['203.0.114.0', false],
    ['203.0.112.255', false],
    ['::ffff:203.0.113.9', true], // an IPv4 peer on a dual-stack socket
    ['198.51.100.7', true],
    ['198.51.100.8', false],
    ['2001:db8::1', true],
    ['2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', true],
    ['2001:db9::1', false],
    ['2001:0DB8:0:0:0:0:0:1', true], // any text form
    ['192.0.2.77', true], // inside the IPv4-mapped range ::ffff:192.0.2.0/120
    ['192.0.3.1', false],
    ['fe80::1', true],
    ['fe80::1%eth0', true], // with a zone
    ['fe80::2', false],
  ])('denies %s: %p', (ip, expected) => {
    expect(denied(ip)).toBe(expected)
  })

  it('matches other entries on the client key, and never a missing IP', () => {
    expect(denied('198.18.0.1', 'tenant-42')).toBe(true)
    expect(denied('198.18.0.1', 'tenant-43')).toBe(false)
    expect(denied(undefined)).toBe(false)
  })

  it('counts nothing for a denied or an allowed client, and denies a client on both lists', async () => {
    const limiter = new Limiter<{ ip: string }>(
      { max: 1, window: '1m', allowList: ['10.0.0.0/8'], denyList: ['10.9.0.0/16'] },
      { ip: (r) => r.ip },
    )
    for (let i = 0; i < 3; i++) expect(limiter.check({ ip: '10.1.1.1' })).toBeUndefined()
    for (let i = 0; i < 3; i++)
      expect(limiter.check({ ip: '10.9.1.1' })).toMatchObject({ allowed: false, denied: true, source: 'denyList' })
    expect((await limiter.peek('10.1.1.1')).remaining).toBe(1)
    expect((await limiter.peek('10.9.1.1')).remaining).toBe(1)
    expect(limiter.check({ ip: '192.0.2.1' })).toMatchObject({ allowed: true })
  })

  it('takes a function of the request, async too', async () => {
    const limiter = new Limiter<{ vip: boolean; ip: string }>(
      { max: 1, allowList: async (r) => r.vip, denyList: (r) => r.ip === '192.0.2.66' },
      { ip: (r) => r.ip },
    )
    expect(await limiter.check({ vip: true, ip: '192.0.2.1' })).toBeUndefined()
    expect(await limiter.check({ vip: false, ip: '192.0.2.66' })).toMatchObject({ denied: true })
    expect(await limiter.check({ vip: false, ip: '192.0.2.1' })).toMatchObject({ allowed: true })
  })
})
