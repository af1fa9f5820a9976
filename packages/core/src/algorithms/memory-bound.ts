/** The key of the count that new clients share once a memory map is full. */
export const OVERFLOW_KEY = '\u0000overflow'

/**
 * The MemoryStore's bound: each of its maps (the counts of one window length, GCRA's arrival times,
 * the logs) holds at most `maxKeys` clients. Past that, a new client is counted in one overflow entry
 * that every new client shares until entries expire: clients already held keep their own counts (none
 * is evicted, so none is reset), and new ones are limited together rather than let through.
 */
export class MemoryBound {
  constructor(
    readonly maxKeys: number,
    private readonly onFull: () => void,
  ) {}

  /** The key `key` is kept under in `map`: itself, or the overflow entry once `map` is full. */
  keyIn(map: ReadonlyMap<string, unknown>, key: string): string {
    if (map.size < this.maxKeys || map.has(key)) return key
    this.onFull()
    return OVERFLOW_KEY
  }
}
