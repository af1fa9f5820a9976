import type { Algorithm } from '../../algorithms'
import type { Config } from '../../options/parse-options'
import type { CallParts } from '../call-parts'
import type { Resilience } from '../failures'
import type { RefundLedger } from '../refund-ledger'
import type { Telemetry } from '../reporting'
import { AdmitPath } from './admit-path'
import type { CountPath, PathHost } from './count-path'
import { IncrementPath } from './increment-path'

/**
 * The path a limiter counts by, for good: the increment path for a single limit of an algorithm that
 * `increments` on a store with `increment`, else the admit path.
 */
export function choosePath(
  config: Config<unknown>,
  algorithm: Algorithm,
  parts: CallParts,
  resilience: Resilience,
  telemetry: Telemetry,
  ledger: RefundLedger,
  host: PathHost,
): CountPath {
  const refunds = config.skipFailedRequests || config.skipSuccessfulRequests
  if (algorithm.increments === true && config.limits === undefined && typeof config.store.increment === 'function')
    return new IncrementPath(config, algorithm, parts, resilience, telemetry, ledger, refunds, host)
  // A decision over per-limit keys does not name them all: its call cannot be rebuilt from it.
  const keepCalls = refunds || algorithm.refundsByCallId || config.limitKeys !== undefined
  return new AdmitPath(algorithm, parts, resilience, telemetry, ledger, keepCalls, config.store, host)
}
