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
  if (releases) checkConcurrency(o)
  const burst = o.burst
  if (burst !== undefined) {
    if (typeof burst !== 'number' || !Number.isSafeInteger(burst) || burst < 1) throw invalidOption('burst', 'a whole number ≥ 1', burst)
    if (!takesBurst) throw invalidOption('burst', 'no burst unless algorithm is "gcra"', burst)
  }
  return { algorithm: algorithm as AlgorithmName, takesBurst, releases, burst: burst as number | undefined }
}

/**
 * Options that mean nothing for requests in flight, refused by name rather than ignored: a slot is
 * held while its request runs, whatever its outcome, and a refused request holds none.
 */
function checkConcurrency(o: Record<string, unknown>): void {
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
