import { type IncomingHttpHeaders, request, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

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

/** Sends `n` requests at once and counts the statuses. */
export async function burst(url: string, n: number, options: Parameters<typeof get>[1] = {}): Promise<Record<number, number>> {
  const replies = await Promise.all(Array.from({ length: n }, () => get(url, options)))
  const counts: Record<number, number> = {}
  for (const reply of replies) counts[reply.status] = (counts[reply.status] ?? 0) + 1
  return counts
}
