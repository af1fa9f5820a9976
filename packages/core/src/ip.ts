/*
 * IP addresses in text form, parsed here rather than with node:net so that core loads on every runtime
 * with Web APIs (Bun, Deno, workerd, browsers). The rules are node:net's isIPv4 and isIPv6, which the
 * tests hold these to: dotted quads without leading zeros, and RFC 4291 section 2.2 text (one "::" at
 * most, an IPv4 tail in the last two groups) with an optional zone index ("%eth0").
 */

/**
 * True for a dotted-quad IPv4 address (four parts of 0 to 255, no leading zeros). Checked without a
 * regular expression: this is the common case, on every request.
 */
export function isIPv4(s: string): boolean {
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

/** A zone index as node:net accepts it after "%". */
const ZONE = /^[0-9a-zA-Z.:-]+$/
const GROUP = /^[0-9a-fA-F]{1,4}$/

/**
 * The eight 16-bit groups of an IPv6 address (its zone index ignored), or undefined when `s` is not
 * one. An IPv4 tail (`::ffff:203.0.113.7`) gives the last two groups.
 */
export function ipv6Groups(s: string): number[] | undefined {
  const percent = s.indexOf('%')
  if (percent !== -1 && !ZONE.test(s.slice(percent + 1))) return undefined
  const text = percent === -1 ? s : s.slice(0, percent)
  const gap = text.indexOf('::')
  if (gap !== -1 && text.indexOf('::', gap + 1) !== -1) return undefined
  const head = gap === -1 ? text : text.slice(0, gap)
  const tail = gap === -1 ? '' : text.slice(gap + 2)
  const before = head === '' ? [] : head.split(':')
  const after = tail === '' ? [] : tail.split(':')
  const groups: number[] = []
  const parts = [...before, ...after]
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    if (GROUP.test(part)) groups.push(Number.parseInt(part, 16))
    else if (i === parts.length - 1 && (gap === -1 || after.length > 0) && isIPv4(part)) {
      const [a, b, c, d] = part.split('.').map(Number) as [number, number, number, number]
      groups.push((a << 8) | b, (c << 8) | d)
    } else return undefined
  }
  if (gap === -1) return groups.length === 8 ? groups : undefined
  if (groups.length > 7) return undefined
  const zeros = Array<number>(8 - groups.length).fill(0)
  return [...groups.slice(0, before.length), ...zeros, ...groups.slice(before.length)]
}

/** True for an IPv6 address in text form, with or without a zone index. */
export function isIPv6(s: string): boolean {
  return ipv6Groups(s) !== undefined
}
