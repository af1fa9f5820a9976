import { type Decision, type Duration, Limiter, type LimiterOptions, RedisStore } from '@tollgate/core'
import { type Cluster, Redis } from 'ioredis'
import type { RedisClusterType } from 'redis'
import { keySlot } from '../../packages/core/src/stores/redis/slots'
import { testPrefix } from '../harness/redis'
import { REDIS_HOST } from '../harness/redis-server'
import { sleep } from '../support/time'

// Helpers of the Cluster fault tests: an admin connection per node, moving a slot by hand the way
// redis-cli --cluster reshard does, and a bounded load of concurrent consume() calls whose admitted
// decisions are counted per client and window.

export interface NodeInfo {
  id: string
  port: number
  /** Cluster bus port (the harness gives each node its own, not port + 10000). */
  busPort: number
  flags: string[]
  masterId: string
  slots: Array<[number, number]>
}

/** A plain connection to one node, for CLUSTER and MIGRATE (the caller quits it). */
export function admin(port: number): Redis {
  return new Redis({ host: REDIS_HOST, port, maxRetriesPerRequest: 1, connectTimeout: 2000, lazyConnect: false })
}

/** CLUSTER NODES as `port`'s node sees it. */
export async function clusterNodes(port: number): Promise<NodeInfo[]> {
  const conn = admin(port)
  try {
    const text = String(await conn.call('CLUSTER', 'NODES'))
    return text
      .trim()
      .split('\n')
      .map((line) => {
        const [id, address, flags, masterId, , , , , ...ranges] = line.split(' ')
        const slots: Array<[number, number]> = []
        for (const r of ranges) {
          if (r.startsWith('[')) continue // a slot being imported or migrated, not served yet
          const [a, b] = r.split('-').map(Number)
          slots.push([a!, b ?? a!])
        }
        return {
          id: id!,
          port: Number(address!.split('@')[0]!.split(':')[1]),
          busPort: Number(address!.split('@')[1]!.split(',')[0]),
          flags: flags!.split(','),
          masterId: masterId!,
          slots,
        }
      })
  } finally {
    conn.disconnect()
  }
}

/** The master serving `slot`, as `port`'s node sees it. */
export async function ownerOf(port: number, slot: number): Promise<NodeInfo> {
  const owner = (await clusterNodes(port)).find((n) => n.flags.includes('master') && n.slots.some(([a, b]) => a <= slot && slot <= b))
  if (owner === undefined) throw new Error(`no master serves slot ${slot} (as seen from port ${port})`)
  return owner
}

/**
 * `count` client keys (made of `stem` and a number) whose store keys all hash to one Cluster slot, and
 * that slot. The hash tag is the client key, so the slot is that of the key itself.
 */
export function clientsInOneSlot(stem: string, count: number, avoid: ReadonlySet<number> = new Set()): { slot: number; keys: string[] } {
  const bySlot = new Map<number, string[]>()
  for (let i = 0; i < 2_000_000; i++) {
    const key = `${stem}-${i}`
    const slot = keySlot(`{${key}}`)
    if (avoid.has(slot)) continue
    const keys = bySlot.get(slot) ?? []
    keys.push(key)
    if (keys.length === count) return { slot, keys }
    bySlot.set(slot, keys)
  }
  throw new Error(`found no ${count} keys of one slot`)
}

/** The slot of a client key's store keys. */
export function slotOfClient(key: string): number {
  return keySlot(`{${key}}`)
}

/**
 * Moves `slot` from the master on `fromPort` to the one on `toPort` as redis-cli --cluster reshard
 * does: IMPORTING on the target, MIGRATING on the source, MIGRATE the keys in small batches (with
 * `pauseMs` between batches, so requests meet the half-moved slot), then SETSLOT NODE everywhere.
 */
export async function migrateSlot(slot: number, fromPort: number, toPort: number, allMasterPorts: number[], pauseMs = 0): Promise<number> {
  const source = admin(fromPort)
  const target = admin(toPort)
  try {
    const sourceId = String(await source.call('CLUSTER', 'MYID'))
    const targetId = String(await target.call('CLUSTER', 'MYID'))
    await target.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', sourceId)
    await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId)
    let moved = 0
    for (let round = 0; round < 1000; round++) {
      const keys = (await source.call('CLUSTER', 'GETKEYSINSLOT', slot, 2)) as string[]
      if (keys.length === 0) break
      await source.call('MIGRATE', REDIS_HOST, toPort, '', 0, 5000, 'KEYS', ...keys)
      moved += keys.length
      if (pauseMs > 0) await sleep(pauseMs)
    }
    // The target first, then the source, then the others: the order redis-cli uses.
    await target.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId)
    await source.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId)
    for (const port of allMasterPorts) {
      if (port === fromPort || port === toPort) continue
      const other = admin(port)
      try {
        await other.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId)
      } finally {
        other.disconnect()
      }
    }
    return moved
  } finally {
    source.disconnect()
    target.disconnect()
  }
}

export interface Admission {
  key: string
  now: number
  decision: Decision
}

/**
 * Runs `concurrency` consume() loops per client key until `stop()` (or `maxMs`, or `maxPerClient`
 * calls per client), recording each decision with the clock value the limiter read for it.
 */
export function consumeLoop(
  limiter: Limiter<unknown>,
  keys: string[],
  clock: { now: number },
  opts: { concurrency: number; maxMs: number; maxPerClient: number; pauseMs?: number },
) {
  const results: Admission[] = []
  const errors: unknown[] = []
  let stopped = false
  const started = Date.now()
  const loops = keys.flatMap((key) => {
    let sent = 0
    return Array.from({ length: opts.concurrency }, async () => {
      while (!stopped && Date.now() - started < opts.maxMs && sent < opts.maxPerClient) {
        sent++
        // The limiter reads its clock synchronously inside consume(): this is the `now` of the decision.
        clock.now = Date.now()
        const now = clock.now
        try {
          results.push({ key, now, decision: (await limiter.consume(key)) as Decision })
        } catch (error) {
          errors.push(error)
        }
        await sleep(opts.pauseMs ?? 1)
      }
    })
  })
  const done = Promise.all(loops)
  return {
    results,
    errors,
    async stop() {
      stopped = true
      await done
    },
  }
}

/** Client-windows (aligned windows of `windowMs`) with more than `max` admitted decisions, as "key@window: n". */
export function overMax(results: Admission[], windowMs: number, max: number, only?: (key: string) => boolean): string[] {
  const admitted = new Map<string, number>()
  for (const r of results) {
    if (!r.decision.allowed || (only !== undefined && !only(r.key))) continue
    const id = `${r.key}@${Math.floor(r.now / windowMs)}`
    admitted.set(id, (admitted.get(id) ?? 0) + 1)
  }
  return [...admitted].filter(([, n]) => n > max).map(([id, n]) => `${id}: ${n}`)
}

/** Decisions by source ("store", "fallback", "cache"...). */
export function bySource(results: Admission[], only?: (key: string) => boolean): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const r of results) {
    if (only !== undefined && !only(r.key)) continue
    counts[r.decision.source] = (counts[r.decision.source] ?? 0) + 1
  }
  return counts
}

/** A limiter on the Cluster (through an ioredis or a node-redis client) with its clock under the test's control, and the store errors it reported. */
export function clusterLimiter(client: Cluster | RedisClusterType, options: Partial<LimiterOptions>, timeout: Duration = 50) {
  const clock = { now: Date.now() }
  const errors: string[] = []
  const logs: string[] = []
  const prefix = testPrefix('cluster-faults')
  const limiter = new Limiter({
    ...options,
    store: new RedisStore({ client, timeout }),
    prefix,
    clock: () => clock.now,
    logger: { warn: (m: string) => void logs.push(m), error: (m: string) => void logs.push(m) },
  } as LimiterOptions)
  limiter.on('storeError', (e: unknown) => void errors.push(String(e)))
  return { limiter, clock, errors, logs, prefix }
}

/** The algorithms under test, each configured so that no aligned window can admit more than `max`. */
export const ALGORITHM_CASES: Array<[string, Partial<LimiterOptions>]> = [
  ['fixed-window', { algorithm: 'fixed-window' }],
  ['sliding-window', { algorithm: 'sliding-window' }],
  // burst 1: admissions at least W/max apart, so at most max in any aligned window (the default
  // burst of max allows up to 2·max − 1 across one, which is GCRA working as designed).
  ['gcra', { algorithm: 'gcra', burst: 1 }],
  ['sliding-log', { algorithm: 'sliding-log' }],
]

/** Leaves `slot` half moved from `fromPort` to `toPort` (IMPORTING, MIGRATING), with `keys` (of that slot) already on the target. */
export async function startMigration(slot: number, fromPort: number, toPort: number, keys: string[]): Promise<void> {
  const source = admin(fromPort)
  const target = admin(toPort)
  try {
    await target.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', String(await source.call('CLUSTER', 'MYID')))
    await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', String(await target.call('CLUSTER', 'MYID')))
    await source.call('MIGRATE', REDIS_HOST, toPort, '', 0, 5000, 'KEYS', ...keys)
  } finally {
    source.disconnect()
    target.disconnect()
  }
}

/** What the importing node on `port` holds for `key` (asked with ASKING, so that it answers), and how many keys of `slot` the node on `sourcePort` still has. */
export async function held(
  port: number,
  key: string,
  slot: number,
  sourcePort: number,
): Promise<{ target: string | null; leftOnSource: number }> {
  const target = admin(port)
  const source = admin(sourcePort)
  try {
    await target.call('ASKING')
    return {
      target: (await target.call('GET', key)) as string | null,
      leftOnSource: Number(await source.call('CLUSTER', 'COUNTKEYSINSLOT', slot)),
    }
  } finally {
    target.disconnect()
    source.disconnect()
  }
}
