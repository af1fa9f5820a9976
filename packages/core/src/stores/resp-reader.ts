/*
 * RESP2 replies read from a byte stream, for the store's own connection (redis-wire.ts): what Redis
 * sends back to MULTI, INCRBY, PEXPIRE, EXEC and the connection's setup (AUTH, SELECT, PING), and any
 * other reply shape besides, so that an unexpected one is read whole rather than misread.
 */

/** An error reply, named as ioredis names its own (`ReplyError`), so failures read the same either way. */
export class WireReplyError extends Error {
  override readonly name = 'ReplyError'
}

/** Not yet a whole reply: wait for more bytes. */
const INCOMPLETE = Symbol('incomplete')
/** What a status reply (+OK, +QUEUED, +PONG) reads as: nothing here uses its text. */
const STATUS = 'OK'

const CR = 13

/** RESP2 replies from a byte stream: status, error, integer, bulk string, array (nested), nil. */
export class ReplyReader {
  private rest: Buffer | undefined
  private pos = 0

  feed(chunk: Buffer, onReply: (value: unknown) => void, onError: () => void): void {
    const bytes = this.rest === undefined ? chunk : Buffer.concat([this.rest, chunk])
    this.rest = undefined
    this.pos = 0
    while (this.pos < bytes.length) {
      const start = this.pos
      let value: unknown
      try {
        value = this.read(bytes)
      } catch {
        onError()
        return
      }
      if (value === INCOMPLETE) {
        this.rest = bytes.subarray(start)
        return
      }
      onReply(value)
    }
  }

  /** The reply at `pos` (moving past it), or INCOMPLETE. */
  private read(b: Buffer): unknown {
    const type = b[this.pos]
    const end = b.indexOf(CR, this.pos + 1)
    if (end === -1 || end + 1 >= b.length) return INCOMPLETE
    const from = this.pos + 1
    this.pos = end + 2
    switch (type) {
      case 0x2b: // +
        return STATUS
      case 0x2d: // -
        return new WireReplyError(b.toString('utf8', from, end))
      case 0x3a: // :
        return integer(b, from, end)
      case 0x24: {
        // $
        const length = integer(b, from, end)
        if (length < 0) return null
        if (this.pos + length + 2 > b.length) return INCOMPLETE
        const text = b.toString('utf8', this.pos, this.pos + length)
        this.pos += length + 2
        return text
      }
      case 0x2a: {
        // *
        const length = integer(b, from, end)
        if (length < 0) return null
        const items = new Array<unknown>(length)
        for (let i = 0; i < length; i++) {
          if (this.pos >= b.length) return INCOMPLETE
          const item = this.read(b)
          if (item === INCOMPLETE) return INCOMPLETE
          items[i] = item
        }
        return items
      }
      default:
        throw new Error(`unknown reply type ${String(type)}`)
    }
  }
}

function integer(b: Buffer, from: number, end: number): number {
  let i = from
  const negative = b[i] === 0x2d
  if (negative) i++
  let n = 0
  for (; i < end; i++) {
    const digit = b[i]! - 0x30
    if (digit < 0 || digit > 9) throw new Error('bad integer')
    n = n * 10 + digit
  }
  return negative ? -n : n
}
