import { describeReply, queuedReplyError, RedisProtocolError } from './transaction'

/*
 * The own connection's replies (own-connection.ts): the commands it writes as RESP, and the transactions
 * (and setup) waiting for their replies, matched in order, each reply checked against what its command
 * answers.
 */

/** RESP for one command; `args` ASCII-free or not, lengths in bytes. */
export function command(...args: string[]): string {
  let out = `*${args.length}\r\n`
  for (const arg of args) out += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`
  return out
}

export const MULTI = /* @__PURE__ */ command('MULTI')
export const EXEC = /* @__PURE__ */ command('EXEC')

/**
 * A transaction (or the connection's setup) waiting for its replies, in the order they come. Every
 * reply but the last answers MULTI (OK) and a queued command (QUEUED), or a setup command (OK); the
 * last one (EXEC's, PING's) settles the promise.
 */
export class Pending {
  next: Pending | undefined
  resolve!: (value: unknown) => void
  reject!: (error: unknown) => void
  readonly promise: Promise<unknown>
  /** Replies heard so far. */
  heard = 0
  /** Error replies before the last: refusals of queued commands (EXECABORT's previousErrors), a refused AUTH. */
  errors: Error[] | undefined
  /** MULTI was refused, so the commands after it ran outside a transaction and their replies are not QUEUED. */
  outside = false
  constructor(
    readonly replies: number,
    /** A MULTI and its queued commands, not setup commands. */
    readonly transaction: boolean,
    readonly sentAt: number,
  ) {
    this.promise = new Promise<unknown>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
  }
}

/** The replies due on one connection, oldest first. */
export class DueReplies {
  head: Pending | undefined
  private tail: Pending | undefined

  add(replies: number, transaction: boolean): Pending {
    const pending = new Pending(replies, transaction, Date.now())
    if (this.tail === undefined) this.head = pending
    else this.tail.next = pending
    this.tail = pending
    return pending
  }

  /**
   * One reply, matched to the oldest waiter: the waiter once this was its last reply (to settle), else
   * undefined. A reply nobody waits for, or one that does not fit its command, goes to `mismatch`.
   */
  hear(value: unknown, mismatch: (error: Error) => void): Pending | undefined {
    const pending = this.head
    if (pending === undefined) {
      mismatch(new RedisProtocolError(`${describeReply(value)} came when no reply was due`))
      return undefined
    }
    const position = pending.heard++
    if (position < pending.replies - 1) {
      if (value instanceof Error) {
        if (position === 0) pending.outside = true
        if (pending.errors === undefined) pending.errors = [value]
        else pending.errors.push(value)
        return undefined
      }
      const error = pending.outside
        ? undefined
        : pending.transaction
          ? queuedReplyError(position, value)
          : value === 'OK'
            ? undefined
            : new RedisProtocolError(`a setup command was answered ${describeReply(value)}, not OK`)
      if (error !== undefined) mismatch(error)
      return undefined
    }
    this.head = pending.next
    if (this.head === undefined) this.tail = undefined
    return pending
  }

  /** The connection closed: every waiter fails with `error`. */
  failAll(error: Error): void {
    for (let p = this.head; p !== undefined; p = p.next) p.reject(error)
    this.head = this.tail = undefined
  }
}

/** Settles a waiter with its last reply: an error (EXECABORT carrying the refusals before it) or the value. */
export function settle(pending: Pending, value: unknown): void {
  if (value instanceof Error) {
    if (pending.errors !== undefined) (value as Error & { previousErrors?: Error[] }).previousErrors = pending.errors
    pending.reject(value)
  } else pending.resolve(value)
}
