/*
 * Redis Cluster redirects that reach the store (issue 12). ioredis's Cluster client follows MOVED and
 * ASK itself for plain commands and EVALSHA, but a MULTI/EXEC whose slot moved to a node the client
 * has not connected to yet comes back as EXECABORT, the redirect only in `err.previousErrors`; and
 * whatever it gives up on (too many redirections, TRYAGAIN while a slot is half migrated) surfaces too.
 * Each of these means the command did not run, so the store refreshes the slot map and tries once
 * more, within the deadline of the original call: never a second try after it, because a decision
 * has by then been taken without the store and a late write would count a request twice.
 */

/** `moved`: the slot map is stale (MOVED, ASK, CLUSTERDOWN); `tryagain`: a slot is mid-migration. */
export type Redirect = 'moved' | 'tryagain'

const REDIRECT = /^(?:Too many Cluster redirections\. Last error: (?:\w+: )?)?(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b/

/**
 * The redirect that made `error` happen, or undefined when it is anything else (a timeout, NOPERM,
 * OOM, a closed connection: a command that may have run is never retried).
 */
export function redirectOf(error: unknown): Redirect | undefined {
  if (!(error instanceof Error)) return undefined
  const match = REDIRECT.exec(error.message)
  if (match !== null) return match[1] === 'TRYAGAIN' ? 'tryagain' : 'moved'
  // ioredis's MULTI/EXEC: "EXECABORT Transaction discarded because of previous errors.", the queued
  // commands' own errors in previousErrors. Only a transaction refused by redirects alone is retried.
  const previous = (error as { previousErrors?: unknown }).previousErrors
  if (!error.message.startsWith('EXECABORT') || !Array.isArray(previous) || previous.length === 0) return undefined
  let kind: Redirect | undefined
  for (const cause of previous) {
    const k = redirectOf(cause)
    if (k === undefined) return undefined
    if (kind === undefined || k === 'tryagain') kind = k
  }
  return kind
}

/** The part of an ioredis `Cluster` used here (`refreshSlotsCache` is public in its JS, marked @ignore in its types). */
interface SlotMapOwner {
  refreshSlotsCache?: (callback?: (error?: Error | null) => void) => void
}

/** Pause before trying a TRYAGAIN again: a migration moves a slot's keys in a few ms at most. */
export const TRYAGAIN_PAUSE_MS = 5
/** A retry needs at least this much of the deadline left to be worth sending. */
const MIN_LEFT_MS = 2

/** True once `owner`'s slot map is refreshed (joining a refresh already under way), false if that took longer than `ms`. */
function refreshSlotMap(owner: SlotMapOwner, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    try {
      owner.refreshSlotsCache!(() => {
        clearTimeout(timer)
        resolve(true)
      })
    } catch {
      clearTimeout(timer)
      resolve(false)
    }
  })
}

/**
 * Gets ready for the one retry of a call that failed with `redirect`: refreshes the slot map (or,
 * for TRYAGAIN, pauses). Resolves true when the retry may go out: the map was refreshed (a retry on
 * the stale map would meet the same redirect) and there is still time before `deadlineAt`, the time
 * the caller stops waiting.
 */
export async function prepareRetry(redirect: Redirect, owner: unknown, deadlineAt: number): Promise<boolean> {
  const left = deadlineAt - Date.now()
  if (left < MIN_LEFT_MS) return false
  if (redirect === 'tryagain') {
    if (left < TRYAGAIN_PAUSE_MS + MIN_LEFT_MS) return false
    await new Promise((resolve) => setTimeout(resolve, TRYAGAIN_PAUSE_MS))
  } else if (typeof (owner as SlotMapOwner | undefined)?.refreshSlotsCache === 'function') {
    if (!(await refreshSlotMap(owner as SlotMapOwner, left - MIN_LEFT_MS))) return false
  }
  return deadlineAt - Date.now() >= MIN_LEFT_MS
}

/**
 * `send()`, sent once more if it failed on a Cluster redirect and there is time before `deadlineAt`
 * (see prepareRetry). The caller's own deadline still bounds the whole.
 */
export async function followRedirects<T>(send: () => Promise<T>, owner: unknown, deadlineAt: number): Promise<T> {
  try {
    return await send()
  } catch (error) {
    const redirect = redirectOf(error)
    if (redirect === undefined || !(await prepareRetry(redirect, owner, deadlineAt))) throw error
    return send()
  }
}
