import { createHash, createHmac } from 'node:crypto'
import { base64url, hex, hmacSha256, sha1, sha256 } from '../../packages/core/src/hashes'
import { clientKey, subPrefix } from '../../packages/core/src/keys'
import { random } from '../support/random'

// Core hashes without node:crypto, so that it loads where there is none (workerd, browsers). The
// hashes name counters in users' Redis (a long client key, a nested limit's prefix), so they must stay
// byte for byte what node:crypto gave: an upgrade must not move any client to a fresh count.

const nodeSha = (text: string | Uint8Array) => createHash('sha256').update(text).digest()

describe('SHA-256 and SHA-1 without node:crypto', () => {
  it('gives node:crypto’s digest at every length around the block edges', () => {
    for (let length = 0; length <= 200; length++) {
      const bytes = Uint8Array.from({ length }, (_, i) => (i * 31 + length) & 0xff)
      expect([length, hex(sha256(bytes))]).toEqual([length, nodeSha(bytes).toString('hex')])
    }
  })

  it('hashes a string as its UTF-8 bytes, lone surrogates included, as node:crypto does', () => {
    const next = random(256)
    for (let i = 0; i < 500; i++) {
      const text = String.fromCharCode(...Array.from({ length: Math.floor(next() * 300) }, () => Math.floor(next() * 0x10000)))
      expect(base64url(sha256(text))).toBe(nodeSha(text).toString('base64url'))
    }
  })

  it('gives node:crypto’s SHA-1 (the EVALSHA name of each script) at every length around the block edges', () => {
    for (let length = 0; length <= 200; length++) {
      const text = 'local count = redis.call("INCRBY", KEYS[1], ARGV[1]) -- é'.repeat(4).slice(0, length)
      expect([length, hex(sha1(text))]).toEqual([length, createHash('sha1').update(text).digest('hex')])
    }
  })

  it('gives node:crypto’s HMAC for a 16-byte key', () => {
    const key = Uint8Array.from({ length: 16 }, (_, i) => i * 17)
    for (const message of ['', '203.0.113.7', 'x'.repeat(1000), 'ключ']) {
      expect(hex(hmacSha256(key, message))).toBe(createHmac('sha256', key).update(message).digest('hex'))
    }
  })

  it('keeps the store keys of long client keys and nested prefixes as they were', () => {
    const long = `user:${'a'.repeat(250)}`
    expect(clientKey(long)).toBe(`#${nodeSha(long).toString('base64url')}`)
    expect(subPrefix('tg:', 'a name with spaces')).toBe(`tg:${nodeSha('a name with spaces').toString('base64url').slice(0, 16)}:`)
  })
})
