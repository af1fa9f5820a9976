import { windowIndex } from '../../keys'
import type { Store } from '../../types'
import type { CallParts } from '../call-parts'

/** Clients a limiter keeps an entry for (~120 bytes each); the entries start over when full. */
const MAX_CELLS = 32_768

/** One client's entry: its store key, built once, and its cell in the window of generation `gen`. */
export interface Entry {
  readonly key: string
  /** `w`: the window the store's cell counts, where the store says (the MemoryStore's cells do). */
  cell: { n: number; readonly w?: number }
  gen: number
}

/** The cell of an entry not yet given one (its `gen` is never current). */
const NO_CELL = { n: 0, w: -1 }

/**
 * The memory store's cells (Store.cell) of one limiter's clients, by client key: counting a client
 * already met in this window is one lookup here and one add, with no store key built or looked up.
 * An entry outlives its window: at a client's first request in a new window it takes the store's
 * cell for that window under the key it keeps, so a client that returns window after window costs
 * one store lookup per window, and no new entry or store key. At most MAX_CELLS entries; past it the
 * map starts over.
 */
export class LocalCells {
  private entries = new Map<string, Entry>()
  /** The window index of the last count, and a generation that changes with it. */
  private index = -1
  private gen = 0

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

  /** Adds `cost` to the client's cell in the window containing `now`; the count after it. */
  add(clientKey: string, cost: number, windowMs: number, now: number): number {
    const cell = this.cellOf(this.entry(clientKey), windowMs, now)
    cell.n += cost
    return cell.n
  }

  /** The client's entry, made with its store key at its first request (its cell is fetched by `cellOf`). */
  entry(clientKey: string): Entry {
    let entry = this.entries.get(clientKey)
    if (entry === undefined) {
      if (this.entries.size >= MAX_CELLS) this.entries = new Map()
      entry = { key: this.parts.storeKey(clientKey), cell: NO_CELL, gen: -1 }
      this.entries.set(clientKey, entry)
    }
    return entry
  }

  /**
   * The entry's cell in the store for the window containing `now`: the one it holds while the window
   * is the one it was taken in, else the store's again.
   */
  cellOf(entry: Entry, windowMs: number, now: number): Entry['cell'] {
    const index = windowIndex(now, windowMs)
    if (index !== this.index) {
      // Another window, or after a clock step back an earlier one: every cell held is stale (the store
      // decides which window a step back counts in), while the store keys stay good.
      this.index = index
      this.gen++
    }
    if (entry.gen !== this.gen) {
      entry.cell = this.store.cell!(entry.key, windowMs, now)
      entry.gen = this.gen
    }
    return entry.cell
  }

  forget(clientKey: string): void {
    this.entries.delete(clientKey)
  }
}
