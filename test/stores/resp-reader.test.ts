import { ReplyReader, WireReplyError } from '../../packages/core/src/stores/redis/resp-reader'

// The RESP2 reader of the store's own connection (packages/core/src/stores/redis/resp-reader.ts): every
// reply read the same however the bytes are cut, and anything that is not RESP reported as such.

function read(chunks: Buffer[]): unknown[] {
  const reader = new ReplyReader()
  const out: unknown[] = []
  for (const chunk of chunks)
    reader.feed(
      chunk,
      (value) => void out.push(value),
      (error) => void out.push(`protocol error: ${error.message}`),
    )
  return out
}

const errorOf = (text: string) => read([Buffer.from(text)])

describe('the reply reader', () => {
  const replies =
    '+OK\r\n+QUEUED\r\n-ERR wrong\r\n:42\r\n:-7\r\n$5\r\nab\r\nc\r\n$-1\r\n$0\r\n\r\n*3\r\n:1\r\n*2\r\n+QUEUED\r\n$2\r\nhi\r\n-EXECABORT done\r\n*0\r\n*-1\r\n+PONG\r\n+other\r\n'
  const expected = [
    'OK',
    'QUEUED',
    new WireReplyError('ERR wrong'),
    42,
    -7,
    'ab\r\nc',
    null,
    '',
    [1, ['QUEUED', 'hi'], new WireReplyError('EXECABORT done')],
    [],
    null,
    'PONG',
    'other',
  ]

  it('reads every reply the same, whole or cut at any byte', () => {
    const bytes = Buffer.from(replies)
    expect(read([bytes])).toEqual(expected)
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(read([bytes.subarray(0, cut), bytes.subarray(cut)])).toEqual(expected)
    }
    expect(read([...bytes].map((b) => Buffer.from([b])))).toEqual(expected)
  })

  it('reports a reply it cannot read instead of guessing', () => {
    expect(errorOf(':12x\r\n')).toEqual([expect.stringMatching(/^protocol error/)])
    expect(errorOf('?what\r\n')).toEqual([expect.stringMatching(/^protocol error/)])
    expect(errorOf(':\r\n')).toEqual([expect.stringMatching(/^protocol error: an integer without digits/)])
    expect(errorOf('$-2\r\n')).toEqual([expect.stringMatching(/^protocol error: bad length/)])
  })

  it('rejects a bulk string not followed by CR LF, rather than skipping two bytes', () => {
    // `$2\r\nhi` then two bytes that are not CR LF: read as "hi" and skipped, they would hide a reply.
    expect(errorOf('$2\r\nhi:1\r\n')).toEqual([expect.stringMatching(/^protocol error: a bulk string is not followed by CR LF/)])
    expect(errorOf('$2\r\nhi\rX')).toEqual([expect.stringMatching(/not followed by CR LF/)])
    expect(errorOf('$2\r\nhi\n\r')).toEqual([expect.stringMatching(/not followed by CR LF/)])
    // A bulk string one byte longer than its length says: the extra byte is not skipped either.
    expect(errorOf('$2\r\nhiX\r\n')).toEqual([expect.stringMatching(/not followed by CR LF/)])
    // The same bytes cut anywhere: the check waits for both bytes, then reports.
    const bytes = Buffer.from('+OK\r\n$2\r\nhi\rX')
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(read([bytes.subarray(0, cut), bytes.subarray(cut)])).toEqual(['OK', expect.stringMatching(/not followed by CR LF/)])
    }
  })

  it('rejects a line whose CR is not followed by LF', () => {
    expect(errorOf('+OK\rX')).toEqual([expect.stringMatching(/^protocol error: a reply line ends in CR without LF/)])
    expect(errorOf(':1\r:2\r\n')).toEqual([expect.stringMatching(/CR without LF/)])
    expect(errorOf('*1\r\n:1\r\r\n')).toEqual([expect.stringMatching(/CR without LF/)])
    // Replies before the bad one are still read, nothing after it.
    expect(errorOf('+OK\r\n:5\r\n$1\rx\r\n:6\r\n')).toEqual(['OK', 5, expect.stringMatching(/CR without LF/)])
  })
})
