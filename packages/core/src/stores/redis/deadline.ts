import { describeValue, TollgateError } from '../../errors'

/**
 * A deadline that does not misfire when this process, not Redis, was slow: if the event loop stalled
 * past the deadline, the timer runs before the reply already waiting in the socket is read. So when it
 * fires, let one poll phase read pending I/O (setImmediate runs after it) before giving up.
 */
export function expire(ms: number, onTimeout: (waitedMs: number) => void, coldStart?: ColdStart): Expiry {
  const expiry = new Expiry()
  let waited = ms
  const fire = () => {
    // A fresh store's first calls may wait for the connection a little longer (RedisStore.coldWait).
    const more = coldStart?.wait() ?? 0
    if (more <= 0) return onTimeout(waited)
    waited += more
    expiry.timer = setTimeout(() => setImmediate(fire), more)
  }
  expiry.timer = setTimeout(() => setImmediate(fire), ms)
  return expiry
}

/** A fresh client's first connection, which calls may wait for past their deadline (RedisStore). */
export interface ColdStart {
  /** How much longer a call that reached its deadline may wait; 0 to give up now. */
  wait(): number
  /** A call got its reply: the cold start is over. */
  answered(): void
}

/** A running deadline: `clear()` it when the reply arrives. */
export class Expiry {
  timer: NodeJS.Timeout | undefined
  clear(): void {
    clearTimeout(this.timer)
  }
}

/**
 * What a store has learnt about its client that a failure's own error does not say: a TLS
 * failure shows only as a connection 'error' event, while the call itself just runs out of time; a
 * script refused by ACL says "can't run this command" without naming it.
 */
export interface FailureCauses {
  /** The client's last connection error, while it is not connected (cleared once it is ready). */
  connectionError(): Error | undefined
  /**
   * What the Redis user may not do (commands, a key outside its key pattern), as a sentence, when
   * known (see client-watch.ts); learnt from `cause`, a failed call's error, when given.
   */
  refusedCommands(cause?: unknown): string | undefined
  /**
   * For a refusal that does not say what was refused (a command refused inside a script): starts
   * finding out, and settles once it is known. Undefined when there is nothing to wait for.
   */
  explain?(cause: unknown): Promise<void> | undefined
}

export function timeoutError(ms: number, causes?: FailureCauses): TollgateError {
  const connection = causes?.connectionError()
  const why = connection === undefined ? '' : `; the connection is failing: ${describeConnectionError(connection)}`
  return new TollgateError(`Redis did not answer within ${ms} ms${why}`, 'TG_STORE_TIMEOUT')
}

/** A Redis failure as a TollgateError that keeps the cause and names it. */
export function storeError(cause: unknown, causes?: FailureCauses): TollgateError {
  if (cause instanceof TollgateError) return cause
  return new TollgateError(`Redis store call failed: ${describeCause(cause, causes)}`, 'TG_STORE_ERROR', { cause })
}

/**
 * The real cause first. EXECABORT only says the transaction was discarded: the refusals that caused it
 * (NOPERM, OOM) are in ioredis's `previousErrors`, one per refused command, often the same for every
 * key of a batch.
 */
function describeCause(cause: unknown, causes: FailureCauses | undefined): string {
  let message = cause instanceof Error ? cause.message : describeValue(cause)
  const previous = (cause as { previousErrors?: unknown } | null)?.previousErrors
  if (Array.isArray(previous) && previous.length > 0) {
    const reasons = new Set(previous.map((e) => (e instanceof Error ? e.message : describeValue(e))))
    message = `${[...reasons].join('; ')} (${message})`
  }
  if (/NOPERM|no permissions|can't run this command|ACL failure/i.test(message)) {
    const refused = causes?.refusedCommands(cause)
    if (refused !== undefined) message += `; ${refused}`
  } else {
    const connection = causes?.connectionError()
    if (connection !== undefined) message += `; the connection is failing: ${describeConnectionError(connection)}`
  }
  return message
}

/** A connection error with its code, marked as TLS when it is one (an untrusted or expired certificate, a wrong hostname). */
export function describeConnectionError(error: Error): string {
  const code = (error as { code?: unknown }).code
  const tls = typeof code === 'string' && /CERT|TLS|SSL/.test(code)
  return `${tls ? 'TLS: ' : ''}${error.message}${typeof code === 'string' && !error.message.includes(code) ? ` (${code})` : ''}`
}

/** `promise`, or a TG_STORE_TIMEOUT rejection after `ms`; a failure becomes a storeError. */
export function withDeadline<T>(promise: Promise<T>, ms: number, causes?: FailureCauses, coldStart?: ColdStart): Promise<T> {
  const started = Date.now()
  return new Promise<T>((resolve, reject) => {
    const expiry = expire(ms, (waited) => reject(timeoutError(waited, causes)), coldStart)
    promise.then(
      (value) => {
        expiry.clear()
        coldStart?.answered()
        resolve(value)
      },
      (error) => {
        expiry.clear()
        // A refusal that does not name what was refused is named once that is known, within the deadline.
        const explained = causes?.explain?.(error)
        if (explained === undefined) return reject(storeError(error, causes))
        const wait = setTimeout(() => reject(storeError(error, causes)), Math.max(0, started + ms - Date.now()))
        void explained.then(() => {
          clearTimeout(wait)
          reject(storeError(error, causes))
        })
      },
    )
  })
}
