import { TollgateError } from '../errors'

/**
 * A refund or a settle on a limiter with `lease`: the units were granted from a count other processes
 * lease from, and moving it would change what their slices stand for. Refused, as the options that
 * refund or settle after the response (skip*Requests, actualCost) are refused with `lease` at construction.
 */
export function notLeased(call: 'refund' | 'settle'): TollgateError {
  return new TollgateError(
    `limiter.${call}: not with the "lease" option: a leased decision's units were granted from a count other processes lease from, ` +
      `and a ${call} would move it; leave out "lease" to ${call} decisions`,
    'TG_INVALID_OPTION',
  )
}
