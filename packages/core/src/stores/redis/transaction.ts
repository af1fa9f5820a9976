import { addFixedWindow, type RedisTransactionLike, type WindowWrite } from '../../algorithms/fixed-window'

/*
 * The one way the fixed window's batcher (batcher.ts) sends a transaction: a TransactionSender.
 * Each transport is one implementation, and each sends what fixedWindowCommands (fixed-window.ts)
 * describes, between MULTI and EXEC:
 * - ClientTransactions, `client.multi()`: the default, on any client (and where a faster transport
 *   steps back: a `multi` the user replaced, a tracer of ioredis's batches);
 * - DirectWriter (direct-writer.ts): ioredis Commands written straight onto a standalone client's
 *   connection, with `transport: 'direct'`;
 * - WireConnection (own-connection.ts): the store's own connection, with `transport: 'own-connection'`.
 * RedisStore picks the sender per transaction (store.ts `transactions`).
 */

/** What sends one fixed-window transaction for the batcher. */
export interface TransactionSender {
  /**
   * Sends MULTI, fixedWindowCommands for each of `writes`, EXEC. Resolves with EXEC's replies, two per
   * write (an Error for a command that failed), or null when Redis aborted the transaction (a WATCH);
   * rejects with EXECABORT (carrying `previousErrors`, the refusals that caused it), with a connection
   * failure, or with a RedisProtocolError when a reply to MULTI or to a queued command was not what
   * that command answers.
   */
  send(writes: readonly WindowWrite[]): Promise<unknown[] | null>
  /**
   * A reply did not fit its command (RedisProtocolError): what this connection reads next can no
   * longer be matched to what was sent, so it is dropped (and reconnected by whoever owns it).
   */
  reset(error: Error): void
  /** A transaction sent here got no reply within its deadline. */
  missed(): void
  /** The client to refresh a Cluster's slot map through, for a redirected transaction (redirects.ts). */
  readonly redis?: unknown
}

/** A reply that is not the shape of the command it answers: the reply stream is out of step with the commands. */
export class RedisProtocolError extends Error {
  override readonly name = 'RedisProtocolError'
  constructor(message: string) {
    super(`Redis protocol error: ${message}`)
  }
}

/** A reply as the message of a RedisProtocolError names it. */
export function describeReply(value: unknown): string {
  if (value instanceof Error) return `an error (${value.message})`
  if (Array.isArray(value)) return `an array of ${value.length}`
  const text = typeof value === 'string' ? JSON.stringify(value) : String(value)
  return text.length > 40 ? `${text.slice(0, 40)}…` : text
}

/**
 * The reply to a command queued in a MULTI (`position` 0 is MULTI itself, then the queued commands):
 * `OK` to MULTI, `QUEUED` to the others, or an error (a refusal, which makes EXEC answer EXECABORT).
 * Undefined when it fits, else the protocol error.
 */
export function queuedReplyError(position: number, value: unknown): RedisProtocolError | undefined {
  if (value instanceof Error) return undefined
  const expected = position === 0 ? 'OK' : 'QUEUED'
  if (value === expected) return undefined
  return new RedisProtocolError(`${position === 0 ? 'MULTI' : 'a queued command'} was answered ${describeReply(value)}, not ${expected}`)
}

/** The client's own `multi()` and its transaction (`RedisClientLike.multi`; node-redis through its adapter). */
export class ClientTransactions implements TransactionSender {
  constructor(readonly redis: { multi(): RedisTransactionLike; disconnect?: unknown }) {}

  send(writes: readonly WindowWrite[]): Promise<unknown[] | null> {
    const tx = this.redis.multi()
    for (const write of writes) addFixedWindow(tx, write)
    return tx.exec().then(unpaired)
  }

  /**
   * An ioredis client (or Cluster) drops its connection and reconnects (`disconnect(true)`): its replies
   * are out of step, so every command on it would get another's answer. Its offline queue and
   * retry strategy stay the user's. Other clients (node-redis) match each reply to its command themselves.
   */
  reset(): void {
    const client = this.redis as { disconnect?: unknown; options?: unknown }
    if (typeof client.disconnect === 'function' && client.options !== undefined) (client.disconnect as (reconnect: boolean) => void)(true)
  }

  /** A slow reply on the client's connection is the client's to judge (its own keep-alive and retries). */
  missed(): void {}
}

/** ioredis's `[error, value]` pairs as the replies themselves (an Error for a failed command). */
function unpaired(pairs: Array<[Error | null, unknown]> | null): unknown[] | null {
  if (pairs === null) return null
  if (!Array.isArray(pairs)) throw new RedisProtocolError(`EXEC was answered ${describeReply(pairs)}, not an array`)
  const replies = new Array<unknown>(pairs.length)
  for (let i = 0; i < pairs.length; i++) {
    const pair = pairs[i]
    replies[i] = Array.isArray(pair) ? (pair[0] ?? pair[1]) : pair
  }
  return replies
}
