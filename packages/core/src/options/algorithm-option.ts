import { invalidOption } from '../errors'
import { ALGORITHM_NAMES, algorithmOf } from '../registry'
import type { AlgorithmName } from '../types'

/** The `algorithm` option once checked, with what the rest of the options are checked against. */
export interface AlgorithmChoice {
  readonly algorithm: AlgorithmName
  /** The algorithm takes a `burst` (GCRA). */
  readonly takesBurst: boolean
  /** The algorithm holds units until the request ends ("concurrency"). */
  readonly releases: boolean
  readonly burst: number | undefined
}

/**
 * The default `window` of algorithm "concurrency", the longest a request holds its slot: longer than
 * the requests a concurrency cap is for (a model's answer, an export), whose slots the second of the
 * other algorithms' default would free while they still run.
 */
export const CONCURRENCY_WINDOW_MS = 60_000

/** Validates `algorithm`, then the options it rules out, then `burst`, which only GCRA takes. */
export function parseAlgorithm(o: Record<string, unknown>): AlgorithmChoice {
  const algorithm = o.algorithm === undefined ? 'fixed-window' : o.algorithm
  if (typeof algorithm !== 'string' || !ALGORITHM_NAMES.includes(algorithm as AlgorithmName)) {
    throw invalidOption('algorithm', ALGORITHM_NAMES.map((a) => `"${a}"`).join(', '), algorithm)
  }
  const chosen = algorithmOf(algorithm as AlgorithmName)
  const takesBurst = chosen.burst
  const releases = chosen.releases === true
  chosen.checkOptions?.(o)
  const burst = o.burst
  if (burst !== undefined) {
    if (typeof burst !== 'number' || !Number.isSafeInteger(burst) || burst < 1) throw invalidOption('burst', 'a whole number ≥ 1', burst)
    if (!takesBurst) throw invalidOption('burst', 'no burst unless algorithm is "gcra"', burst)
  }
  return { algorithm: algorithm as AlgorithmName, takesBurst, releases, burst: burst as number | undefined }
}
