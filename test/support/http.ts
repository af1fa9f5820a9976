import { type IncomingHttpHeaders, request, type Server } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'

export interface Reply {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

/** Listens on an ephemeral port of 127.0.0.1 and returns the base URL. */
export async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

export function close(server: Server): Promise<void> {
  server.closeAllConnections?.()
  return new Promise((resolve) => server.close(() => resolve()))
}

/** One real HTTP request over its own connection (no agent pooling), bounded in time. */
export function get(url: string, options: { method?: string; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: options.method ?? 'GET', headers: options.headers, agent: false, timeout: options.timeoutMs ?? 10_000 },
      (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          body += chunk
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
      },
    )
    req.on('timeout', () => req.destroy(new Error(`request to ${url} timed out`)))
    req.on('error', reject)
    req.end()
  })
}

/**
 * Sends `n` requests at once and counts the statuses. "At once" from the server's point of view:
 * requests sent one after another through `get()` reached the server spread over many event-loop
 * turns, so some were decided before others were read and a GET-then-INCR limiter slipped past.
 * Here every connection is opened and accepted first, then every request is written in one
 * synchronous loop: the server, in this process so it cannot run while the loop does, finds all of
 * them waiting and reads them in the same turn. For servers listening in this process only.
 */
export async function burst(url: string, n: number, options: Parameters<typeof get>[1] = {}): Promise<Record<number, number>> {
  const target = new URL(url)
  const timeoutMs = options.timeoutMs ?? 10_000
  // Connection: close, so each reply ends with the server closing its socket: no body parsing needed.
  const headers: Record<string, string> = { host: target.host, connection: 'close' }
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value
  const head = `${options.method ?? 'GET'} ${target.pathname}${target.search} HTTP/1.1\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n`

  const sockets: Socket[] = []
  let timer: NodeJS.Timeout | undefined
  try {
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`burst of ${n} requests to ${url} did not finish within ${timeoutMs} ms`)), timeoutMs)
    })
    const connected = Array.from({ length: n }, () => {
      const socket = connect({ host: target.hostname, port: Number(target.port) })
      sockets.push(socket)
      return new Promise<Socket>((resolve, reject) => {
        socket.once('connect', () => resolve(socket))
        socket.once('error', reject)
      })
    })
    await Promise.race([Promise.all(connected), timedOut])
    // Connected is not yet accepted: Node's server takes about one pending connection per event-loop
    // turn (observed on Node 20), and a request written to a connection it has not accepted yet is
    // read turns after the others. Give the server (in this process) a turn per connection first.
    for (let turn = 0; turn < n + 10; turn++) await new Promise((resolve) => setImmediate(resolve))
    // Listen before the first byte is written: a reply can arrive while later requests are written.
    const replies = sockets.map(
      (socket) =>
        new Promise<number>((resolve, reject) => {
          if (socket.destroyed) return reject(new Error(`connection to ${url} closed before the request was sent`))
          const chunks: Buffer[] = []
          socket.on('data', (chunk: Buffer) => chunks.push(chunk))
          socket.once('error', reject)
          socket.once('close', () => {
            const statusLine = Buffer.concat(chunks).toString('latin1').split('\r\n', 1)[0] ?? ''
            const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]
            if (status === undefined) reject(new Error(`no HTTP reply from ${url} (got ${JSON.stringify(statusLine.slice(0, 80))})`))
            else resolve(Number(status))
          })
        }),
    )
    for (const socket of sockets) socket.write(head)
    const statuses = await Promise.race([Promise.all(replies), timedOut])
    const counts: Record<number, number> = {}
    for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1
    return counts
  } finally {
    clearTimeout(timer)
    for (const socket of sockets) socket.destroy()
  }
}
