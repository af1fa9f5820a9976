import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Redis } from 'ioredis'
import { REDIS_HOST } from './redis-server'

/*
 * A small front of the Upstash REST protocol for a real redis-server, so the Upstash store is tested
 * against Redis itself (its Lua, its TTLs, its errors) with only the transport in between:
 * - POST /            a JSON array, one command: `["INCRBY", "k", 1]` → `{ "result": 1 }` or `{ "error": "…" }` (400)
 * - POST /pipeline    an array of commands → an array of `{ result }` or `{ error }`, one per command
 * - POST /multi-exec  the same in MULTI/EXEC; a transaction Redis aborts (EXECABORT) → `{ error }` (400)
 * - every request needs `Authorization: Bearer <token>` (else 401)
 * - with `Upstash-Encoding: base64` (what @upstash/redis sends by default) every string of a result is
 *   base64, as the client decodes it; without, results go as they are.
 * It listens on 127.0.0.1 only, on a free port, and forwards on one ioredis connection of its own.
 */

export type FrontMode =
  /** Answers every request. */
  | 'answer'
  /** Takes requests and never answers them, until the mode changes or the front closes: a hung gateway. */
  | 'stall'
  /** Answers every request with a 503, as a gateway with no backend does. */
  | 'fail'

export interface RestFront {
  /** `http://127.0.0.1:PORT` */
  readonly url: string
  readonly token: string
  /** Requests received, by path: what a store costs in HTTP requests. */
  readonly requests: Map<string, number>
  /** The commands received, by name in upper case (EVALSHA, EVAL, INCRBY...). */
  readonly commands: Map<string, number>
  mode: FrontMode
  /** Stops listening, drops every connection (answered or not) and quits its Redis connection. */
  close(): Promise<void>
}

type Command = [string, ...unknown[]]
type Reply = { result: unknown } | { error: string }

export async function startRestFront(redisUrl: string): Promise<RestFront> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: true })
  const token = randomUUID()
  const requests = new Map<string, number>()
  const commands = new Map<string, number>()
  const stalled = new Set<ServerResponse>()
  const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1)

  const server = createServer((req, res) => {
    void readBody(req).then(async (body) => {
      const path = req.url?.split('?')[0] ?? '/'
      count(requests, path)
      if (front.mode === 'stall') return void stalled.add(res)
      if (front.mode === 'fail') return send(res, 503, { error: 'Service Unavailable' })
      if (req.headers.authorization !== `Bearer ${token}`) return send(res, 401, { error: 'Unauthorized' })
      const base64 = String(req.headers['upstash-encoding'] ?? '').toLowerCase() === 'base64'
      const encode = (reply: Reply): Reply => ('result' in reply && base64 ? { result: encoded(reply.result) } : reply)
      let parsed: unknown
      try {
        parsed = JSON.parse(body)
      } catch {
        return send(res, 400, { error: 'ERR the body is not JSON' })
      }
      if (path === '/') {
        if (!isCommand(parsed)) return send(res, 400, { error: 'ERR expected a command: a JSON array of strings and numbers' })
        count(commands, parsed[0].toUpperCase())
        const reply = await redis.call(parsed[0], ...args(parsed)).then(
          (result) => ({ result }),
          (error: Error) => ({ error: error.message }),
        )
        return send(res, 'error' in reply ? 400 : 200, encode(reply))
      }
      if (path !== '/pipeline' && path !== '/multi-exec') return send(res, 404, { error: `ERR no such endpoint ${path}` })
      if (!Array.isArray(parsed) || parsed.length === 0 || !parsed.every(isCommand)) {
        return send(res, 400, { error: 'ERR expected a JSON array of commands' })
      }
      const batch = path === '/pipeline' ? redis.pipeline() : redis.multi()
      for (const command of parsed as Command[]) {
        count(commands, command[0].toUpperCase())
        batch.call(command[0], ...args(command))
      }
      try {
        const pairs = (await batch.exec()) ?? []
        return send(
          res,
          200,
          pairs.map(([error, result]) => encode(error ? { error: error.message } : { result })),
        )
      } catch (error) {
        return send(res, 400, { error: (error as Error).message })
      }
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, REDIS_HOST, resolve)
  })
  const { port } = server.address() as AddressInfo
  const front: RestFront = {
    url: `http://${REDIS_HOST}:${port}`,
    token,
    requests,
    commands,
    mode: 'answer',
    async close() {
      for (const res of stalled) res.destroy()
      stalled.clear()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      redis.disconnect()
    },
  }
  return front
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })
}

function isCommand(value: unknown): value is Command {
  return (
    Array.isArray(value) &&
    typeof value[0] === 'string' &&
    value.every((v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean')
  )
}

/** A command's arguments as Redis takes them: the client sends numbers as JSON numbers. */
function args(command: Command): string[] {
  return command.slice(1).map(String)
}

/** A result as the base64 encoding has it: each string base64 (UTF-8), at any depth; numbers and nil as they are. */
function encoded(result: unknown): unknown {
  if (typeof result === 'string') return Buffer.from(result, 'utf8').toString('base64')
  if (Array.isArray(result)) return result.map(encoded)
  return result
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}
