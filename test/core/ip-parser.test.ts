import { isIPv4 as nodeIsIPv4, isIPv6 as nodeIsIPv6 } from 'node:net'
import { ipv6Groups, isIPv4, isIPv6 } from '../../packages/core/src/ip'
import { random } from '../support/random'

// Core parses IP addresses itself, so that it loads where there is no node:net (Bun, Deno, workerd).
// node:net is the reference it must agree with, on chosen addresses and on random strings built from
// the characters addresses are made of.

/** The groups of `text` as the WHATWG URL parser reads an IPv6 host: an independent parse to compare with. */
function urlGroups(text: string): number[] {
  const host = new URL(`http://[${text}]/`).hostname.slice(1, -1)
  return ipv6Groups(host)!
}

describe('the IP parser', () => {
  it.each([
    ['::', [0, 0, 0, 0, 0, 0, 0, 0]],
    ['::1', [0, 0, 0, 0, 0, 0, 0, 1]],
    ['1::', [1, 0, 0, 0, 0, 0, 0, 0]],
    ['2001:db8::ff00:42:8329', [0x2001, 0xdb8, 0, 0, 0, 0xff00, 0x42, 0x8329]],
    ['2001:0DB8:0000:0000:0000:FF00:0042:8329', [0x2001, 0xdb8, 0, 0, 0, 0xff00, 0x42, 0x8329]],
    ['1:2:3:4:5:6:7::', [1, 2, 3, 4, 5, 6, 7, 0]],
    ['::2:3:4:5:6:7:8', [0, 2, 3, 4, 5, 6, 7, 8]],
    ['::ffff:203.0.113.7', [0, 0, 0, 0, 0, 0xffff, 0xcb00, 0x7107]],
    ['::FFFF:203.0.113.7', [0, 0, 0, 0, 0, 0xffff, 0xcb00, 0x7107]],
    ['1:2:3:4:5:6:1.2.3.4', [1, 2, 3, 4, 5, 6, 0x102, 0x304]],
    ['fe80::1%eth0', [0xfe80, 0, 0, 0, 0, 0, 0, 1]],
    ['fe80::1%1', [0xfe80, 0, 0, 0, 0, 0, 0, 1]],
  ])('reads %s as its eight groups', (text, groups) => {
    expect(ipv6Groups(text)).toEqual(groups)
    expect(isIPv6(text)).toBe(true)
  })

  it.each([
    '',
    ':',
    ':::',
    '1:::2',
    '1::2::3',
    ':1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8:9',
    '1::2:3:4:5:6:7:8',
    '12345::',
    'g::',
    '1.2.3.4::',
    '::1.2.3.4:5',
    '::01.2.3.4',
    '::256.0.0.1',
    '1:2:3:4:5:6:7:1.2.3.4',
    'fe80::1%',
    'fe80::1%eth 0',
  ])('refuses %p, as node:net does', (text) => {
    expect(isIPv6(text)).toBe(false)
    expect(nodeIsIPv6(text)).toBe(false)
  })

  it('agrees with node:net on random strings of address characters', () => {
    const next = random(50)
    const alphabet = ['0', '1', '9', 'a', 'f', 'F', 'g', ':', ':', ':', '.', '%', '25', '255', '256', 'ffff', '::', '::ffff:', 'e']
    let valid = 0
    for (let i = 0; i < 20_000; i++) {
      let text = ''
      const length = 1 + Math.floor(next() * 14)
      for (let j = 0; j < length; j++) text += alphabet[Math.floor(next() * alphabet.length)]
      expect([text, isIPv4(text), isIPv6(text)]).toEqual([text, nodeIsIPv4(text), nodeIsIPv6(text)])
      if (isIPv6(text) && !text.includes('%')) {
        valid++
        expect([text, ipv6Groups(text)]).toEqual([text, urlGroups(text)])
      }
    }
    expect(valid).toBeGreaterThan(200)
  })

  it('agrees with node:net on random IPv6 addresses in every text form', () => {
    const next = random(51)
    for (let i = 0; i < 5_000; i++) {
      const groups = Array.from({ length: 8 }, () => (next() < 0.4 ? 0 : Math.floor(next() * 0x10000)))
      const full = groups.map((g) => g.toString(16)).join(':')
      const short = new URL(`http://[${full}]/`).hostname.slice(1, -1)
      const v4 = `${groups
        .slice(0, 6)
        .map((g) => g.toString(16))
        .join(':')}:${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`
      for (const text of [full, short, v4, full.toUpperCase()]) {
        expect([text, nodeIsIPv6(text)]).toEqual([text, true])
        expect([text, ipv6Groups(text)]).toEqual([text, groups])
      }
    }
  })

  it('agrees with node:net on dotted quads and near misses', () => {
    const next = random(52)
    for (let i = 0; i < 20_000; i++) {
      const parts = Array.from({ length: next() < 0.9 ? 4 : 3 + Math.floor(next() * 3) }, () => {
        const r = next()
        return r < 0.1 ? `0${Math.floor(next() * 10)}` : r < 0.15 ? '' : String(Math.floor(next() * 300))
      })
      const text = parts.join('.')
      expect([text, isIPv4(text)]).toEqual([text, nodeIsIPv4(text)])
    }
  })
})
