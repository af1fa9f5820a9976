/**
 * Every command list Tollgate sends to Redis, in one place.
 *
 * FIXED_WINDOW: one transaction per window key, `MULTI; INCRBY key cost; PEXPIRE key ttl; EXEC`.
 *   KEYS[1] = `<prefix>{<client key>}:<window index>`; the braces are a Cluster hash tag, so every
 *             window of one client lands in one slot.
 *   ARGV    = cost (INCRBY), ttl in ms (PEXPIRE): the time left in the window plus TTL_MARGIN_MS.
 *   Replies = [count after the increment, 1].
 *   The count INCRBY returns is the decision's input: the read and the write are one atomic step,
 *   so a concurrent burst cannot slip past the limit the way GET-then-INCR lets it. PEXPIRE runs in
 *   the same transaction, so no key ever exists without a TTL, even if the client dies mid-request.
 *   Re-arming the TTL on every hit cannot stretch the window: the window is in the key's name.
 *   When requests for one key arrive in the same event-loop turn, their costs are merged into one
 *   INCRBY and each request is given its own position inside the returned total.
 */
export function fixedWindowCommands(key: string, cost: number, ttlMs: number): Array<Array<string | number>> {
  return [
    ['incrby', key, cost],
    ['pexpire', key, ttlMs],
  ]
}
/** Replies per key in FIXED_WINDOW; the INCRBY reply is the first. */
export const FIXED_WINDOW_REPLIES = 2

/**
 * How far past the window's end a key lives. Processes decide the window from their own clocks;
 * the margin keeps a key alive for a process whose clock lags by up to this much, while a key
 * still never outlives its window by more than this.
 */
export const TTL_MARGIN_MS = 1000
