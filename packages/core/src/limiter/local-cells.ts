import { windowIndex } from '../keys'
import type { Store } from '../types'
import type { CallParts } from './call-parts'

/** Clients whose cells a limiter keeps per window (~60 bytes each); past it the store is asked each time. */
const MAX_CELLS = 65_536

/**
 * The memory store's cells (Store.cell) of one limiter's clients in the current fixed window, by
 * client key: counting a known client is one lookup here and one add, with no store key built or
 * looked up. Kept for one window only, at most MAX_CELLS clients (the store's own map counts past it).
 */
export class LocalCells {
  private cells = new Map<string, { n: number }>()
  private index = -1

  private constructor(
    private readonly store: Store,
    /** The store's `increment` the cells stand for. */
    private readonly increment: Store['increment'],
    private readonly parts: CallParts,
  ) {}

  /**
   * Cells for `store` when it offers them and they stand for its `increment`: a subclass that overrides
   * `increment` (to observe or change counting) and not `cell` keeps its `increment` called.
   */
  static of(store: Store, parts: CallParts): LocalCells | undefined {
    if (!store.local || typeof store.cell !== 'function') return undefined
    for (let o: object | null = store; o !== null; o = Object.getPrototypeOf(o)) {
      if (Object.hasOwn(o, 'increment')) return Object.hasOwn(o, 'cell') ? new LocalCells(store, store.increment, parts) : undefined
      if (Object.hasOwn(o, 'cell')) return undefined
    }
    return undefined
  }

  /** False once something else stands in the store's `increment` (a spy or patch put there later, as jest.spyOn does): it is called instead. */
  get current(): boolean {
    return this.store.increment === this.increment
  }

  /** Adds `cost` to the client's cell; the count after it. */
  add(clientKey: string, cost: number, windowMs: number, now: number): number {
    const index = windowIndex(now, windowMs)
    if (index !== this.index) {
      // Another window: its cells are the store's to drop (or, after a clock step back, not this window's).
      if (this.cells.size > 0) this.cells = new Map()
      this.index = index
    }
    let cell = this.cells.get(clientKey)
    if (cell === undefined) {
      cell = this.store.cell!(this.parts.storeKey(clientKey), windowMs, now)
      if (this.cells.size < MAX_CELLS) this.cells.set(clientKey, cell)
    }
    cell.n += cost
    return cell.n
  }

  forget(clientKey: string): void {
    this.cells.delete(clientKey)
  }
}
