// Small helpers the in-process benchmarks share (hot-path.mjs, hook-cost.mjs, instructions.mjs).

/** 10,000 distinct client addresses, 10.0.0.0 upwards: the "many" mode's clients, round-robin. */
export const CLIENTS = Array.from({ length: 10_000 }, (_, k) => `10.${(k >> 16) & 255}.${(k >> 8) & 255}.${k & 255}`)

/** The median of the numbers in `xs` that are not NaN (the mean of the middle two for an even count); NaN when none. */
export function median(xs) {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b)
  if (s.length === 0) return Number.NaN
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
