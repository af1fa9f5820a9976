import { invalidOption } from '../errors'
import type { HeaderStyle } from '../types'
import { isPlainObject } from './checks'
import type { LimiterOptions } from './limiter-options'

/** The options that shape a response, not a count: which headers go out, and the status and body of a refusal. */
export interface ResponseOptions<Req> {
  readonly headers: HeaderStyle | false
  readonly headersOn: 'all' | 'allowed' | 'refused'
  readonly statusCode: number
  readonly denyStatusCode: number
  readonly message: LimiterOptions<Req>['message']
}

const HEADER_STYLES = ['draft-6', 'draft-7', 'draft-8']

/**
 * Validates the response options, in the order parseOptions always checked them, so the first bad
 * option named in the error stays the same. The two booleans (`legacyHeaders`, `refusalHeaders`) and
 * `denyMessage` are only checked here: the caller reads them from the options as given.
 */
export function parseResponseOptions<Req>(o: Record<string, unknown>): ResponseOptions<Req> {
  let headers: HeaderStyle | false
  if (o.headers === undefined || o.headers === true) headers = 'draft-8'
  else if (o.headers === false) headers = false
  else if (typeof o.headers === 'string' && HEADER_STYLES.includes(o.headers)) headers = o.headers as HeaderStyle
  else throw invalidOption('headers', 'true, false, "draft-8", "draft-7" or "draft-6"', o.headers)

  const headersOn = o.headersOn === undefined ? 'all' : o.headersOn
  if (headersOn !== 'all' && headersOn !== 'allowed' && headersOn !== 'refused') {
    throw invalidOption('headersOn', '"all", "allowed" or "refused"', headersOn)
  }
  if (o.refusalHeaders !== undefined && typeof o.refusalHeaders !== 'boolean')
    throw invalidOption('refusalHeaders', 'true or false', o.refusalHeaders)
  if (o.legacyHeaders !== undefined && typeof o.legacyHeaders !== 'boolean')
    throw invalidOption('legacyHeaders', 'true or false', o.legacyHeaders)

  const statusCode = o.statusCode === undefined ? 429 : o.statusCode
  if (typeof statusCode !== 'number' || !Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599) {
    throw invalidOption('statusCode', 'an HTTP error status from 400 to 599', statusCode)
  }

  const denyStatusCode = o.denyStatusCode === undefined ? 403 : o.denyStatusCode
  if (typeof denyStatusCode !== 'number' || !Number.isInteger(denyStatusCode) || denyStatusCode < 400 || denyStatusCode > 599) {
    throw invalidOption('denyStatusCode', 'an HTTP error status from 400 to 599', denyStatusCode)
  }

  const message = o.message
  for (const [name, value] of [
    ['message', message],
    ['denyMessage', o.denyMessage],
  ] as const) {
    if (value !== undefined && typeof value !== 'string' && typeof value !== 'function' && !isPlainObject(value)) {
      throw invalidOption(name, 'a string, a plain object, or a function returning one', value)
    }
  }
  return { headers, headersOn, statusCode, denyStatusCode, message: message as LimiterOptions<Req>['message'] }
}
