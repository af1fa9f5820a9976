import { invalidOption } from '../errors'
import type { LimitSpec } from '../types'
import type { Algorithm } from './algorithm'
import { type MemoryTwin, oneKeyPerLimit, type Verdict } from './protocol'
import { addEntry, removeAt, TimeLogs } from './time-log'
import type { Windows } from './windows'

/*
 * Concurrency: at most `max` units in flight per client. An admitted call holds one slot per unit until
 * it is released (the limiter's `release`, run by the adapters when the response ends or is cut off),
 * and never longer than the window: the slots of a process that died mid-request free themselves.
 * One key per limit, `<stem>:slots` (a sorted set in Redis): one member per held unit, named by the
 * call id (`<id>:<unit>`) and scored by its admission time. The store's work is the sliding log's
 * (sliding-log.ts) with the window read as a slot's longest hold; what differs is what the numbers
 * mean to a client (`verdict`), since a slot frees whenever a request ends, not at a known time.
 * The store's numbers per limit: [slots held before, admission time of the slot whose expiry would
 * free enough room, when there is none], which bounds the Retry-After.
 */

/**
 * How long a refused client is told to wait. A slot frees whenever a request of the client ends, which
 * no one can predict; a second is the shortest `Retry-After` (whole seconds) and is soon enough for a
 * client that retries to take a slot freed meanwhile.
 */
export const CONCURRENCY_RETRY_MS = 1000

/*
 * The store's scripts are the sliding log's (log-scripts.ts): the admit counts the slots held within the
 * window, the first admit of each period drops those older (their holder died or never released them)
 * as the TTL moves on, so a set outlives its newest slot by at most two windows and the margin; the
 * release removes exactly the slots the call took, named by its id, so a release sent again after a
 * reconnect finds none of them and frees nothing more (no record of its call needed).
 */

/** A member that stands for a slot another store reported (the fallback's copy of the store's count). */
const SEED = 'seed:'

function memory(windows: Windows): MemoryTwin {
  const sets = new TimeLogs(windows)
  return sets.twin(false, {
    seed(call, i, a, _b, admitted) {
      // Unlike a count in a window, slots held fall whenever requests end: the store's latest answer is
      // the best account of them, so it replaces the one seeded before. The slots this store admitted
      // itself (during an outage) stay, released by their own ids.
      const slots = sets.of(call, i)
      for (let at = slots.members.length - 1; at >= 0; at--) if (slots.members[at]!.startsWith(SEED)) removeAt(slots, at)
      const held = admitted ? a + call.cost : a
      for (let n = 0; n < held; n++) addEntry(slots, call.now, `${SEED}${call.id}:${n}`)
    },
    // A slot is held or free: there is no count to move to an actual cost (the limiter refuses actualCost).
    settle() {},
  })
}

/**
 * `remaining` is the free slots. A slot frees when a request ends, at a time no one knows, so the
 * reset (the `t` of the RateLimit field) and the wait of a refused client are a short look-again
 * delay, CONCURRENCY_RETRY_MS, or, for a refused client, less when the slot whose expiry frees enough
 * room expires sooner.
 */
function verdict(out: Verdict, limit: LimitSpec, a: number, b: number, cost: number, now: number, admitted: boolean): void {
  const { max, windowMs: W } = limit
  out.fits = a + cost <= max
  const wait = out.fits || cost > max ? CONCURRENCY_RETRY_MS : Math.max(1, Math.min(CONCURRENCY_RETRY_MS, b + W - now))
  out.count = a + cost
  out.remaining = Math.max(0, max - (admitted ? a + cost : a))
  out.resetAt = now + wait
  out.retryAfterMs = out.fits ? 0 : wait
}

/**
 * Options that mean nothing for requests in flight, refused by name rather than ignored: a slot is
 * held while its request runs, whatever its outcome, and a refused request holds none.
 */
function checkOptions(o: Record<string, unknown>): void {
  const why = 'with algorithm "concurrency"'
  if (typeof o.window === 'function') {
    throw invalidOption('window', `a duration ${why} (the longest a request holds its slot), not a function`, o.window)
  }
  if (o.blockDuration !== undefined) {
    throw invalidOption(
      'blockDuration',
      `no blockDuration ${why}: a block would refuse the client while its slots are free`,
      o.blockDuration,
    )
  }
  if (o.actualCost !== undefined) {
    throw invalidOption('actualCost', `no actualCost ${why}: a request holds one slot while it runs, whatever it costs`, o.actualCost)
  }
  for (const flag of ['skipFailedRequests', 'skipSuccessfulRequests'] as const) {
    if (o[flag] === true) {
      throw invalidOption(flag, `no ${flag} ${why}: every request frees its slot when its response ends, whatever its status`, o[flag])
    }
  }
}

export const concurrency: Algorithm = {
  name: 'concurrency',
  burst: false,
  refundsByCallId: true,
  releases: true,
  checkOptions,
  keys: /* @__PURE__ */ oneKeyPerLimit('slots'),
  // A slot is held or free, whatever the units: a settle moves nothing (the limiter refuses actualCost).
  settleKeys: /* @__PURE__ */ oneKeyPerLimit('slots'),
  memory,
  verdict,
  unavailable(limit, now, allow, values) {
    values.push(allow ? 0 : limit.max, now)
  },
}
