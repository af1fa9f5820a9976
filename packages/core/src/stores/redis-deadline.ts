import { describeValue, TollgateError } from '../errors'

/**
 * A deadline that does not misfire when this process, not Redis, was slow: if the event loop stalled
 * past the deadline, the timer runs before the reply already waiting in the socket is read. So when it
 * fires, let one poll phase read pending I/O (setImmediate runs after it) before giving up.
 */
export function expire(ms: number, onTimeout: () => void): NodeJS.Timeout {
  return setTimeout(() => setImmediate(onTimeout), ms)
}

export function timeoutError(ms: number): TollgateError {
  return new TollgateError(`Redis did not answer within ${ms} ms`, 'TG_STORE_TIMEOUT')
}

/** A Redis failure as a TollgateError that keeps the cause. */
export function storeError(cause: unknown): TollgateError {
  if (cause instanceof TollgateError) return cause
  const message = cause instanceof Error ? cause.message : describeValue(cause)
  return new TollgateError(`Redis store call failed: ${message}`, 'TG_STORE_ERROR', { cause })
}

/** `promise`, or a TG_STORE_TIMEOUT rejection after `ms`; a failure becomes a storeError. */
export function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = expire(ms, () => reject(timeoutError(ms)))
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error) => {
        clearTimeout(timer)
        reject(storeError(error))
      },
    )
  })
}
