// The runner talks to the helper processes it starts over their stdin, a word per line (`stats`), and
// holds it open: when the runner goes away, even killed, stdin ends and the helper stops.

/** Calls `onLine` with each line of stdin, trimmed, and `onEnd` once stdin ends or fails. */
export function readRunner(onLine, onEnd) {
  let buf = ''
  process.stdin.setEncoding('utf8')
  process.stdin.on('data', (d) => {
    buf += d
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i).trim()
      buf = buf.slice(i + 1)
      onLine(line)
    }
  })
  process.stdin.on('end', onEnd)
  process.stdin.on('error', onEnd)
}
