import assert from 'node:assert/strict'
import type { Store, StoreCall, StoreResult } from '../types'

/*
 * What the store contract's parts share: the runner and store they are given, time units, the admit
 * whose answer is checked for shape, Redis key checks.
 */

/** The two functions of a test runner the suite declares its cases with: jest's, vitest's, mocha's or node:test's. */
export interface ContractRunner {
  describe(name: string, body: () => void): unknown
  it(name: string, body: () => Promise<void>): unknown
}

/**
 * What the Redis checks read through: an ioredis `Redis` or `Cluster` fits (a Cluster is scanned on
 * each of its masters).
 */
export interface ContractRedis {
  scan(cursor: string, match: 'MATCH', pattern: string, count: 'COUNT', n: number): Promise<[string, string[]]>
  pttl(key: string): Promise<number>
  nodes?(role: 'master'): ContractRedis[]
}

/** What `make` returns: a fresh store, and a key prefix no other test uses. */
export interface ContractStore {
  store: Store
  prefix: string
}

export const SECOND = 1000
export const MINUTE = 60 * SECOND
export const HOUR = 60 * MINUTE

/** The start of the next window of `ms`: tests place their calls at known distances from its edges. */
export function windowStart(ms: number): number {
  return (Math.floor(Date.now() / ms) + 1) * ms
}

/** One admit, its answer checked for shape: a boolean and two finite numbers per limit. */
export async function admit(store: Store, call: StoreCall): Promise<StoreResult> {
  const result = await store.admit(call)
  assert.equal(typeof result.allowed, 'boolean', 'admit answers { allowed: boolean }')
  assert.equal(result.values.length, 2 * call.limits.length, 'admit answers two numbers per limit')
  assert.deepEqual(
    result.values.filter((v) => !Number.isFinite(v)),
    [],
    'every number of an answer is finite',
  )
  return result
}

/** The hash tag Redis Cluster hashes a key by: the text inside its first `{...}`, else the whole key. */
export function hashTag(key: string): string {
  const open = key.indexOf('{')
  const close = open === -1 ? -1 : key.indexOf('}', open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : key
}

async function scanNode(node: ContractRedis, pattern: string, found: Set<string>): Promise<void> {
  let cursor = '0'
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
    for (const key of keys) found.add(key) // SCAN may return a key more than once
    cursor = next
  } while (cursor !== '0')
}

/** Keys under `prefix`, found with SCAN (KEYS would block a server others share), on every master of a Cluster. */
export async function keysUnder(client: ContractRedis, prefix: string): Promise<string[]> {
  const pattern = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`
  const found = new Set<string>()
  const masters = typeof client.nodes === 'function' ? client.nodes('master') : [client]
  assert.ok(masters.length > 0, 'the Cluster client knows no master yet: run a command first so it loads the slot map')
  await Promise.all(masters.map((node) => scanNode(node, pattern, found)))
  return [...found].sort()
}

/** Keys under `prefix` that would live forever (PTTL -1; -2 is a key that expired between SCAN and PTTL). */
export async function keysWithoutTtl(client: ContractRedis, prefix: string): Promise<string[]> {
  const keys = await keysUnder(client, prefix)
  const ttls = await Promise.all(keys.map((key) => client.pttl(key)))
  return keys.filter((_, i) => ttls[i] === -1)
}
