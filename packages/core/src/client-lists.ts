import { invalidOption } from './errors'
import { ipv6Groups, isIPv4, isIPv6 } from './ip'

/*
 * Allow and deny lists (`allowList`, `denyList`): IPv4 and IPv6 addresses and CIDR ranges, matched on
 * the client IP as the framework resolved it (after its proxy setting; IPv4-mapped IPv6 folded to
 * IPv4), and any other string, matched on the client key (your `key()`, or the IP key).
 */

/** An IPv6 address as one 128-bit number. */
function ipv6Bits(address: string): bigint {
  let bits = 0n
  for (const group of ipv6Groups(address) ?? []) bits = (bits << 16n) | BigInt(group)
  return bits
}

function ipv4Bits(address: string): number {
  let bits = 0
  for (const part of address.split('.')) bits = bits * 256 + Number(part)
  return bits
}

/** `::ffff:a.b.c.d` (an IPv4 peer on a dual-stack socket) as a.b.c.d; anything else as it is. */
function folded(ip: string): string {
  const zone = ip.indexOf('%')
  const address = zone === -1 ? ip : ip.slice(0, zone)
  if (isIPv6(address)) {
    const bits = ipv6Bits(address)
    if (bits >> 32n === 0xffffn) return [24, 16, 8, 0].map((s) => Number((bits >> BigInt(s)) & 0xffn)).join('.')
  }
  return address
}

/** A parsed list: ranges of each family and exact client keys. */
export class ClientList {
  private readonly v4: Array<{ network: number; size: number }> = []
  private readonly v6: Array<{ network: bigint; mask: bigint }> = []
  private readonly keys = new Set<string>()

  /** Parses `entries` (option `name`), throwing an error that names the bad entry. */
  constructor(name: string, entries: unknown) {
    if (!Array.isArray(entries))
      throw invalidOption(name, 'an array of IPs, CIDR ranges or client keys, or a function of the request', entries)
    entries.forEach((entry, i) => {
      if (typeof entry !== 'string' || entry.length === 0)
        throw invalidOption(`${name}[${i}]`, 'an IP, a CIDR range or a client key', entry)
      const slash = entry.indexOf('/')
      const address = slash === -1 ? entry : entry.slice(0, slash)
      const family = isIPv4(address) ? 4 : isIPv6(address) ? 6 : 0
      if (family === 0) {
        if (slash !== -1) throw invalidOption(`${name}[${i}]`, 'a CIDR range like "203.0.113.0/24" or "2001:db8::/32"', entry)
        this.keys.add(entry)
        return
      }
      const max = family === 4 ? 32 : 128
      const prefix = slash === -1 ? max : Number(entry.slice(slash + 1))
      if (!Number.isInteger(prefix) || prefix < 0 || prefix > max || (slash !== -1 && !/^\d+$/.test(entry.slice(slash + 1)))) {
        throw invalidOption(`${name}[${i}]`, `a prefix length from 0 to ${max} after "/"`, entry)
      }
      const v4 = family === 4 ? address : folded(address)
      if (isIPv4(v4) && (family === 4 || prefix >= 96)) {
        // An IPv4-mapped IPv6 range is the IPv4 range it maps.
        const p = family === 4 ? prefix : prefix - 96
        const size = 2 ** (32 - p)
        this.v4.push({ network: Math.floor(ipv4Bits(v4) / size) * size, size })
      } else {
        const mask = prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(128 - prefix)
        this.v6.push({ network: ipv6Bits(address) & mask, mask })
      }
    })
  }

  /** True when the client IP falls in a range of the list, or its client key is listed. */
  matches(ip: string | undefined, key: string | undefined): boolean {
    if (key !== undefined && this.keys.has(key)) return true
    if (ip === undefined || (this.v4.length === 0 && this.v6.length === 0)) return false
    const address = folded(ip)
    if (isIPv4(address)) {
      const bits = ipv4Bits(address)
      for (const r of this.v4) if (bits >= r.network && bits < r.network + r.size) return true
      return false
    }
    if (!isIPv6(address)) return false
    const bits = ipv6Bits(address)
    for (const r of this.v6) if ((bits & r.mask) === r.network) return true
    return false
  }
}
