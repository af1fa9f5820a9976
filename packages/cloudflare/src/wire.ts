import type { StoreCall } from '@tollgate/core/store'

/*
 * What travels between DurableObjectStore (in the app's Worker) and TollgateCounter (the Durable Object):
 * one POST per store call, a JSON operation in and `{ result }` or `{ error }` out. Kept in one file so the
 * two sides cannot drift apart, and plain JSON over `fetch` so any compatibility date and any stub (a
 * Worker's, or a test's) carries it.
 */

/** One store call, as the object receives it. */
export type Operation =
  | { op: 'admit' | 'refund' | 'forget'; call: StoreCall }
  | { op: 'settle'; call: StoreCall; actualCost: number; now: number }
  | { op: 'increment'; key: string; cost: number; windowMs: number; now: number }
  | { op: 'blockedUntil'; key: string; now: number }
  | { op: 'block'; key: string; until: number; now: number }
  | { op: 'unblock'; key: string }

/** What the object answers. */
export type Answer = { result: unknown } | { error: string }

/**
 * The name of the object that owns `key`: its hash tag, `<prefix>{<client key>}`, the part every key of one
 * client (or of one `hashTag`) shares, as a Redis Cluster slot would. So one object holds all of a call's
 * keys and decides it atomically, and the counts, blocks and fast-path counters of a client meet in it.
 * A key without a tag (a third-party caller's) is its own owner.
 */
export function ownerOf(key: string): string {
  const open = key.indexOf('{')
  const close = open === -1 ? -1 : key.indexOf('}', open + 1)
  return close > open + 1 ? key.slice(0, close + 1) : key
}

/** The key an operation is routed by. */
export function keyOf(operation: Operation): string {
  return 'call' in operation ? operation.call.storeKey : operation.key
}
