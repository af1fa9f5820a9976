import { base64url, sha256 } from './hashes'
import { ipv6Groups, isIPv4 } from './ip'
import type { StoreCall } from './types'

/*
 * The key grammar, in one place. A store key is `<prefix>{<client key>}` plus a suffix per limit and
 * algorithm: `tg:{203.0.113.7}:1763729100` for the default one-second fixed window (the window index
 * is floor(now / windowMs)). The braces are a Redis Cluster hash tag, so every key of one client lands
 * in one slot and one script may touch them all. With several limits, each limit's keys carry its
 * label: `tg:{203.0.113.7}:1s:1763729100`. A limit with a key of its own has that key's stem instead,
 * and with `hashTag` every key of a call hashes on the tag (scopedStem).
 */

/** Key of the shared bucket for requests whose client IP cannot be resolved (see docs/guides/proxies.md). */
export const UNKNOWN_CLIENT_KEY = 'unknown-ip'
/** Longer client keys are replaced by a hash, so a key function cannot blow up store keys. */
export const MAX_KEY_LENGTH = 200

/** The client key as stored: itself, or a hash of it when it is longer than MAX_KEY_LENGTH. */
export function clientKey(key: string): string {
  if (key.length <= MAX_KEY_LENGTH) return key
  return `#${base64url(sha256(key))}`
}

/**
 * `<prefix>{<client key>}`. A brace inside the client key would end the Cluster hash tag early (a key
 * starting with "}" hashes on nothing, and one client's keys would spread over slots: CROSSSLOT), so
 * braces are escaped, and with them "%", the escape character, which keeps the escaping one to one.
 */
export function storeKey(prefix: string, client: string): string {
  return `${prefix}{${TAG_UNSAFE.test(client) ? client.replace(/[{}%]/g, escapeChar) : client}}`
}
const TAG_UNSAFE = /[{}%]/
const escapeChar = (c: string) => (c === '{' ? '%7B' : c === '}' ? '%7D' : '%25')

/**
 * Key stem of limit `i`: the plain store key for a single limit (so the default key stays
 * `<prefix>{<client>}:<window>`), the call's own stem for a limit with a key of its own (scopedStem).
 */
export function stem(call: Pick<StoreCall, 'storeKey' | 'limits' | 'stems'>, i: number): string {
  if (call.stems !== undefined) return call.stems[i]!
  const limit = call.limits[i]!
  return call.limits.length === 1 && limit.keyed !== true ? call.storeKey : `${call.storeKey}:${limit.label}`
}

/**
 * Key stem of a limit counted under `client` (its own key, or the request's client key) with its
 * `label`. Without a hash tag, the stem is the one the request's client key would get, so a limit
 * without a key of its own keeps the keys of `limits` as they were: `tg:{tenant:acme}:1m`. With one
 * (`hashTag`, for Redis Cluster), every key of the call hashes on the tag and the client key follows
 * it: `tg:{acme}:tenant:acme:1m`. The tag is escaped as a client key is (storeKey), so it always
 * closes where it should; what follows the tag cannot move the slot.
 */
export function scopedStem(prefix: string, tag: string | undefined, client: string, label: string): string {
  return tag === undefined ? `${storeKey(prefix, client)}:${label}` : `${storeKey(prefix, tag)}:${client}:${label}`
}

/** Index of the fixed window containing `now`. Shared by every store and algorithm so they agree on edges. */
export function windowIndex(now: number, windowMs: number): number {
  return Math.floor(now / windowMs)
}

/**
 * True when `prefix` is a usable key prefix. Braces would move the Redis Cluster hash tag off the
 * client key, so one client's windows could land in different slots.
 */
export function isPrefix(prefix: unknown): prefix is string {
  return typeof prefix === 'string' && prefix.length <= 128 && !/[{}\s]/.test(prefix)
}

/**
 * Key prefix for a limit nested under another (a route's own limit under a plugin's): the parent's
 * prefix plus the name, hashed when the name would make an unusable prefix, so limits that share a
 * store never share counts.
 */
export function subPrefix(base: string, name: string): string {
  if (/^[^{}\s]+$/.test(name) && base.length + name.length < 128) return `${base}${name}:`
  return `${base}${base64url(sha256(name)).slice(0, 16)}:`
}

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
  if (isIPv4(address)) return address
  const groups = ipv6Groups(address)
  if (groups === undefined) return undefined
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
