/**
 * A seeded pseudo-random sequence in [0, 1) (mulberry32): the one generator of the property tests, so a
 * failing sequence replays from its seed. Any integer is a usable seed.
 */
export function random(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
