/*
 * SHA-256 and SHA-1 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), synchronous and without node:crypto, so
 * that core loads on every runtime with Web APIs: Web Crypto's digest is asynchronous, and the hashes
 * here are taken on the way of a request (a long client key, a script's EVALSHA name) and must be the
 * ones node:crypto gave, since they name counters in users' Redis.
 */

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be,
  0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa,
  0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85,
  0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
  0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
  0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
])

const rotr = (x: number, n: number): number => (x >>> n) | (x << (32 - n))

/** The message as both hashes read it: a 1 bit, zeros, and its length in bits (64-bit big-endian), in whole 64-byte blocks. */
function padded(data: string | Uint8Array): DataView {
  const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data
  const blocks = new Uint8Array((((bytes.length + 8) >> 6) + 1) << 6)
  blocks.set(bytes)
  blocks[bytes.length] = 0x80
  const view = new DataView(blocks.buffer)
  view.setUint32(blocks.length - 8, Math.floor(bytes.length / 0x20000000))
  view.setUint32(blocks.length - 4, bytes.length << 3)
  return view
}

/** Adds a block's working variables into the state, word by word (mod 2^32). */
function add(h: Uint32Array, words: readonly number[]): void {
  for (let i = 0; i < h.length; i++) h[i]! += words[i]!
}

/** The state words as the digest's bytes, big-endian. */
function digest(h: Uint32Array): Uint8Array {
  const out = new Uint8Array(h.length * 4)
  const view = new DataView(out.buffer)
  for (let i = 0; i < h.length; i++) view.setUint32(i * 4, h[i]!)
  return out
}

/** The SHA-256 digest of `data` (a string is hashed as its UTF-8 bytes). */
export function sha256(data: string | Uint8Array): Uint8Array {
  const view = padded(data)
  const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19])
  const w = new Uint32Array(64)
  for (let block = 0; block < view.byteLength; block += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(block + i * 4)
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15]!
      const b = w[i - 2]!
      w[i] = w[i - 16]! + (rotr(a, 7) ^ rotr(a, 18) ^ (a >>> 3)) + w[i - 7]! + (rotr(b, 17) ^ rotr(b, 19) ^ (b >>> 10))
    }
    let [a, b, c, d, e, f, g, hh] = h as unknown as [number, number, number, number, number, number, number, number]
    for (let i = 0; i < 64; i++) {
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i]! + w[i]!) | 0
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0
      hh = g
      g = f
      f = e
      e = (d + t1) | 0
      d = c
      c = b
      b = a
      a = (t1 + t2) | 0
    }
    add(h, [a, b, c, d, e, f, g, hh])
  }
  return digest(h)
}

/** The SHA-1 digest of `data` (a string is hashed as its UTF-8 bytes): the name EVALSHA gives a script. */
export function sha1(data: string | Uint8Array): Uint8Array {
  const view = padded(data)
  const h = new Uint32Array([0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0])
  const w = new Uint32Array(80)
  for (let block = 0; block < view.byteLength; block += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(block + i * 4)
    for (let i = 16; i < 80; i++) w[i] = rotr(w[i - 3]! ^ w[i - 8]! ^ w[i - 14]! ^ w[i - 16]!, 31)
    let [a, b, c, d, e] = h as unknown as [number, number, number, number, number]
    for (let i = 0; i < 80; i++) {
      const [f, k] =
        i < 20
          ? [(b & c) | (~b & d), 0x5a827999]
          : i < 40
            ? [b ^ c ^ d, 0x6ed9eba1]
            : i < 60
              ? [(b & c) | (b & d) | (c & d), 0x8f1bbcdc]
              : [b ^ c ^ d, 0xca62c1d6]
      const t = (rotr(a, 27) + f + e + k + w[i]!) | 0
      e = d
      d = c
      c = rotr(b, 2)
      b = a
      a = t
    }
    add(h, [a, b, c, d, e])
  }
  return digest(h)
}

/** HMAC-SHA-256 of `message` under `key` (a key of at most 64 bytes, as every caller here draws). */
export function hmacSha256(key: Uint8Array, message: string): Uint8Array {
  const inner = new Uint8Array(64)
  const outer = new Uint8Array(64)
  inner.set(key)
  outer.set(key)
  for (let i = 0; i < 64; i++) {
    inner[i]! ^= 0x36
    outer[i]! ^= 0x5c
  }
  const text = new TextEncoder().encode(message)
  const first = new Uint8Array(64 + text.length)
  first.set(inner)
  first.set(text, 64)
  const second = new Uint8Array(96)
  second.set(outer)
  second.set(sha256(first), 64)
  return sha256(second)
}

/** `bytes` in base64url without padding, as node:crypto's digest('base64url') writes it. */
export function base64url(bytes: Uint8Array): string {
  let binary = ''
  for (const b of bytes) binary += String.fromCharCode(b)
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

/** `bytes` in lowercase hexadecimal. */
export function hex(bytes: Uint8Array): string {
  let text = ''
  for (const b of bytes) text += b.toString(16).padStart(2, '0')
  return text
}
