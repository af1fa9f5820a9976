import { windowIndex } from '../../keys'
import type { MemoryStore } from '../../stores/memory-store'
import type { CallParts } from '../call-parts'

/** Clients the mirror keeps an entry for (~100 bytes each); past it, the counts go to the fallback and the entries start over. */
const MAX_ENTRIES = 32_768

/** An entry's `w` before its first count: below any window, and a small integer too. */
const NO_WINDOW = -0x3fffffff

/**
 * One client's entry: its store key, built once, and the last count the store returned for it, in
 * window `w`, counted from the mirror's first window so that it stays a small integer (a window index
 * itself is past V8's small integers, and a field holding one is a boxed number on every write).
 */
export interface MirrorEntry {
  readonly key: string
  n: number
  w: number
}

/**
 * The fallback's mirror of a remote store's counts on the fast path (resilience.ts): per client, its
 * store key and the last count the store returned in the current window, found with one lookup by
 * client key. The counts stay here, not in the fallback store, until the fallback is about to decide
 * for the client (`handOver`): on healthy traffic, mirroring a count is a comparison, where putting
 * every count in the fallback store cost one more lookup in a map of every client per client and
 * window. The fallback then starts from the count the store last returned, as before.
 */
export class MirrorCells {
  private entries = new Map<string, MirrorEntry>()
  /** The window index `w` counts from: the one of the mirror's first count. */
  private base = Number.NaN

  constructor(
    private readonly parts: CallParts,
    private readonly fallback: MemoryStore,
    private readonly windowMs: number,
  ) {}

  /** The window containing `now`, as an entry's `w`. */
  private window(now: number): number {
    const index = windowIndex(now, this.windowMs)
    if (Number.isNaN(this.base)) this.base = index
    return index - this.base
  }

  /** The client's entry, made with its store key at its first request. */
  entry(clientKey: string, now: number): MirrorEntry {
    let entry = this.entries.get(clientKey)
    if (entry === undefined) {
      if (this.entries.size >= MAX_ENTRIES) this.startOver(now)
      entry = { key: this.parts.storeKey(clientKey), n: 0, w: NO_WINDOW }
      this.entries.set(clientKey, entry)
    }
    return entry
  }

  /**
   * The store returned `count` for the entry's client in the window containing `now`: kept, unless a
   * later window's count is already there (a late reply, or a clock stepping back).
   */
  keep(entry: MirrorEntry, count: number, now: number): void {
    const index = this.window(now)
    if (index > entry.w) {
      entry.w = index
      entry.n = count
    } else if (index === entry.w && count > entry.n) entry.n = count
  }

  /** The fallback is about to decide for `clientKey` at `now`: the store's last count of it in this window goes in first. */
  handOver(clientKey: string, now: number): void {
    const entry = this.entries.get(clientKey)
    if (entry !== undefined) this.seed(entry, now)
  }

  forget(clientKey: string): void {
    this.entries.delete(clientKey)
  }

  private seed(entry: MirrorEntry, now: number): void {
    if (entry.n > 0 && entry.w === this.window(now)) this.fallback.seedCount(entry.key, this.windowMs, now, entry.n)
  }

  /** Full: every count of the current window goes to the fallback store, which bounds its own size, and the entries start over. */
  private startOver(now: number): void {
    for (const entry of this.entries.values()) this.seed(entry, now)
    this.entries = new Map()
  }
}
