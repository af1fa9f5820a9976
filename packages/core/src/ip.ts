import { isIPv4, isIPv6 } from 'node:net'

/**
 * Turns the client IP the framework resolved into a rate-limit key.
 * - IPv4 stays as it is.
 * - IPv4-mapped IPv6 (`::ffff:203.0.113.7`, as dual-stack sockets report IPv4 peers) folds to the
 *   IPv4 address, so the same client is one bucket whichever socket family it arrived on, and two
 *   distinct IPv4 clients are never merged into one IPv6 subnet.
 * - Other IPv6 is grouped by its first `subnet` bits (default /56, the smallest allocation ISPs hand a
 *   home customer, as express-rate-limit 8 does): one host owns a whole /64 and could otherwise rotate
 *   through 2^64 addresses, each with a fresh quota.
 * Returns undefined when there is no usable address.
 */
export function ipKey(ip: string | undefined | null, subnet: number | false): string | undefined {
  if (!ip) return undefined
  let address = ip
  const zone = address.indexOf('%')
  if (zone !== -1) address = address.slice(0, zone)
  if (isDottedQuad(address) || isIPv4(address)) return address
  if (!isIPv6(address)) return undefined
  const groups = expandIPv6(address)
  if (groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff) {
    return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`
  }
  if (subnet === false || subnet >= 128) return groups.map((g) => g.toString(16)).join(':')
  const out: string[] = []
  let bits = subnet
  for (let i = 0; i < 8 && bits > 0; i++, bits -= 16) {
    const g = groups[i]!
    out.push((bits >= 16 ? g : g & (0xffff << (16 - bits)) & 0xffff).toString(16))
  }
  return `${out.join(':')}::/${subnet}`
}

/**
 * The common case, on every request: a dotted-quad IPv4 address, checked without a regular
 * expression. Same rules as node:net isIPv4 (four parts of 0 to 255, no leading zeros).
 */
function isDottedQuad(s: string): boolean {
  const n = s.length
  if (n < 7 || n > 15) return false
  let dots = 0
  let value = 0
  let digits = 0
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i)
    if (c === 46) {
      if (digits === 0 || value > 255) return false
      dots++
      value = 0
      digits = 0
    } else if (c >= 48 && c <= 57) {
      if (digits === 1 && value === 0) return false
      value = value * 10 + c - 48
      if (++digits > 3) return false
    } else return false
  }
  return dots === 3 && digits > 0 && value <= 255
}

/** Expands a valid IPv6 text form (possibly with an embedded IPv4 tail) to eight 16-bit groups. */
function expandIPv6(address: string): number[] {
  let text = address.toLowerCase()
  const lastColon = text.lastIndexOf(':')
  const tail = text.slice(lastColon + 1)
  if (tail.includes('.')) {
    const [a, b, c, d] = tail.split('.').map(Number) as [number, number, number, number]
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, rest] = text.split('::') as [string, string | undefined]
  const headGroups = head ? head.split(':') : []
  const restGroups = rest ? rest.split(':') : []
  const missing = 8 - headGroups.length - restGroups.length
  const all = rest === undefined ? headGroups : [...headGroups, ...Array<string>(missing).fill('0'), ...restGroups]
  return all.map((g) => Number.parseInt(g, 16))
}
