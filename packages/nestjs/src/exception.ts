import { STATUS_CODES } from 'node:http'
import { HttpException, StreamableFile } from '@nestjs/common'
import type { Decision, Rejection } from '@tollgate/core/adapter'

/**
 * What TollgateGuard throws for a refused request (429, or the `statusCode` option) and for a client on
 * the deny list (403, `denyStatusCode`), after the RateLimit and Retry-After headers are set on the
 * response. Nest's default exception filter sends `rejection` as it is, so the client gets the same
 * status, content type and body as from the Express and fastify adapters; an exception filter of your
 * own can catch it and answer otherwise (the headers stay set).
 */
export class RateLimitException extends HttpException {
  constructor(
    /** Status, content type and body of the refusal (problem details by default, or the `message` option). */
    readonly rejection: Rejection,
    /** The refusing decision; undefined for a client on the deny list. */
    readonly decision: Decision | undefined,
  ) {
    super(STATUS_CODES[rejection.status] ?? 'Too Many Requests', rejection.status)
  }

  /** True when the client is on the `denyList` (no quota was counted). */
  get denied(): boolean {
    return this.decision === undefined
  }

  /**
   * The body as Nest's exception filter sends it: the rejection's bytes and content type. A string or
   * an object would be rewrapped or re-typed as application/json by the filter; a StreamableFile is
   * sent as it is on both platforms. A new one each call, since a stream is read once (the bytes under
   * it are the rejection's own, encoded once).
   */
  override getResponse(): StreamableFile {
    const body = this.rejection.bytes
    return new StreamableFile(body, { type: this.rejection.contentType, length: body.length })
  }
}
