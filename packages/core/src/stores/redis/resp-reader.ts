/*
 * RESP2 replies read from a byte stream, for the store's own connection (own-connection.ts): what Redis
 * sends back to MULTI, INCRBY, PEXPIRE, EXEC and the connection's setup (AUTH, SELECT, PING), and any
 * other reply shape besides, so that an unexpected one is read whole rather than misread. Every line
 * must end in CR LF, and a bulk string's bytes be followed by CR LF: anything else is not RESP, and is
 * reported rather than skipped, since the bytes after it could be read as any reply.
 */

/** An error reply, named as ioredis names its own (`ReplyError`), so failures read the same either way. */
export class WireReplyError extends Error {
  override readonly name = 'ReplyError'
}

/** Not yet a whole reply: wait for more bytes. */
const INCOMPLETE = Symbol('incomplete')
const CR = 13
const LF = 10
/** The status replies the connection expects, read without allocating a string each. */
const STATUSES = /* @__PURE__ */ ['OK', 'QUEUED', 'PONG'].map((text) => ({ text, bytes: Buffer.from(text) }))

/** RESP2 replies from a byte stream: status, error, integer, bulk string, array (nested), nil. */
export class ReplyReader {
  private rest: Buffer | undefined
  private pos = 0

  feed(chunk: Buffer, onReply: (value: unknown) => void, onError: (error: Error) => void): void {
    const bytes = this.rest === undefined ? chunk : Buffer.concat([this.rest, chunk])
    this.rest = undefined
    this.pos = 0
    while (this.pos < bytes.length) {
      const start = this.pos
      let value: unknown
      try {
        value = this.read(bytes)
      } catch (error) {
        onError(error as Error)
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
    if (b[end + 1] !== LF) throw new Error('a reply line ends in CR without LF')
    const from = this.pos + 1
    this.pos = end + 2
    switch (type) {
      case 0x2b: // +
        return status(b, from, end)
      case 0x2d: // -
        return new WireReplyError(b.toString('utf8', from, end))
      case 0x3a: // :
        return integer(b, from, end)
      case 0x24: {
        // $
        const length = integer(b, from, end)
        if (length < 0) return nil(length)
        if (this.pos + length + 2 > b.length) return INCOMPLETE
        if (b[this.pos + length] !== CR || b[this.pos + length + 1] !== LF) throw new Error('a bulk string is not followed by CR LF')
        const text = b.toString('utf8', this.pos, this.pos + length)
        this.pos += length + 2
        return text
      }
      case 0x2a: {
        // *
        const length = integer(b, from, end)
        if (length < 0) return nil(length)
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

/** A status reply's text: one of STATUSES as it is, any other read anew. */
function status(b: Buffer, from: number, end: number): string {
  for (const { text, bytes } of STATUSES) if (end - from === bytes.length && b.compare(bytes, 0, bytes.length, from, end) === 0) return text
  return b.toString('utf8', from, end)
}

/** RESP2's null bulk string or array: a length of -1, no other negative one. */
function nil(length: number): null {
  if (length !== -1) throw new Error(`bad length ${length}`)
  return null
}

function integer(b: Buffer, from: number, end: number): number {
  let i = from
  const negative = b[i] === 0x2d
  if (negative) i++
  if (i === end) throw new Error('an integer without digits')
  let n = 0
  for (; i < end; i++) {
    const digit = b[i]! - 0x30
    if (digit < 0 || digit > 9) throw new Error('bad integer')
    n = n * 10 + digit
  }
  return negative ? -n : n
}
