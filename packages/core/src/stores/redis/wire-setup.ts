import type { Socket } from 'node:net'
import { nodeBuiltin } from './node-builtins'
import { command } from './wire-replies'

/*
 * What the own connection (own-connection.ts) takes from the user's client to be its shadow: where the
 * client connects and how (TLS, keep-alive), and how it logs in (AUTH, SELECT); and when it tries again
 * after a drop.
 */

/** The part of a standalone ioredis client the connection reads: its settings, its state and its events. */
export interface WireClient {
  readonly status?: string
  readonly options?: ClientOptions
  /** ioredis's current database (it follows `client.select()`); the settings' db when absent. */
  readonly condition?: { readonly select?: unknown }
  on(event: string, listener: () => void): unknown
}

export interface ClientOptions {
  host?: unknown
  port?: unknown
  path?: unknown
  family?: unknown
  tls?: unknown
  username?: unknown
  password?: unknown
  db?: unknown
  keyPrefix?: unknown
  sentinels?: unknown
  Connector?: unknown
  connectTimeout?: unknown
  keepAlive?: unknown
}

/** A standalone ioredis client whose server the connection can reach itself (not a Sentinel's, nor a custom Connector's). */
export function followable(client: object): client is WireClient & { readonly options: ClientOptions } {
  const c = client as Partial<WireClient>
  const options = c.options
  return (
    typeof c.on === 'function' &&
    options !== null &&
    typeof options === 'object' &&
    options.sentinels == null &&
    options.Connector == null &&
    (typeof options.path === 'string' || typeof options.port === 'number')
  )
}

/** A socket to where the client connects, as ioredis connects; undefined when the settings cannot open one. */
export function connectLike(o: ClientOptions): Socket | undefined {
  const target: Record<string, unknown> =
    typeof o.path === 'string' ? { path: o.path } : { port: o.port, host: o.host ?? 'localhost', family: o.family }
  let socket: Socket
  try {
    // As ioredis connects: TLS whenever `tls` is set (a rediss:// URL sets it to true), its options over the target.
    const tls = o.tls ? { ...target, ...(typeof o.tls === 'object' ? o.tls : {}) } : undefined
    const net = nodeBuiltin<typeof import('node:net')>('node:net')
    const tlsModule = nodeBuiltin<typeof import('node:tls')>('node:tls')
    if (net === undefined || tlsModule === undefined) return undefined
    socket = tls === undefined ? net.createConnection(target as { port: number }) : tlsModule.connect(tls)
  } catch {
    return undefined
  }
  socket.setNoDelay(true)
  // On as ioredis turns it on for its own socket, with the client's `keepAlive` delay when it gives one.
  socket.setKeepAlive(true, typeof o.keepAlive === 'number' && o.keepAlive > 0 ? o.keepAlive : 0)
  socket.unref()
  return socket
}

/** The setup, pipelined: AUTH as the client authenticates, SELECT its db, then PING; and how many replies it gets. */
export function setupCommands(o: ClientOptions, db: number): { setup: string; replies: number } {
  let setup = ''
  let replies = 1
  if (typeof o.password === 'string' && o.password !== '') {
    setup += typeof o.username === 'string' && o.username !== '' ? command('AUTH', o.username, o.password) : command('AUTH', o.password)
    replies++
  }
  if (db !== 0) {
    setup += command('SELECT', String(db))
    replies++
  }
  return { setup: setup + command('PING'), replies }
}

/**
 * After this connection drops while the client stays ready: the first wait before reopening, and the
 * longest. Waiting is cheap, since the client carries the transactions meanwhile and only the fast
 * path's saving is forgone; a try on a path still silent is not, since every request on it waits out
 * its deadline.
 */
const REOPEN_MIN_MS = 1000
const REOPEN_MAX_MS = 30_000
/**
 * A connection has proven itself, and the wait goes back to the shortest, once it still answers a
 * transaction this long after it became ready. As long as the longest wait: a path that drops the
 * connection more often than that keeps it at the longest wait, where its tries cost least.
 */
const PROVEN_MS = REOPEN_MAX_MS
/** When the own connection reopens after a drop while the client stays ready (own-connection.ts). */
export class ReopenBackoff {
  /** No connection opens before this, the end of the wait after the last drop, even when the client is ready again meanwhile. */
  quietUntil = 0
  /** The wait after the next drop. */
  private waitMs = REOPEN_MIN_MS
  /** When the current connection became ready, and whether it has proven itself since (PROVEN_MS). */
  private readyAt = 0
  private proven = false

  ready(now: number): void {
    this.readyAt = now
    this.proven = false
  }

  /** A transaction was answered: once PROVEN_MS after the connection became ready, the wait goes back to the shortest. */
  answered(now: number): void {
    if (!this.proven && now - this.readyAt >= PROVEN_MS) {
      this.proven = true
      this.waitMs = REOPEN_MIN_MS
    }
  }

  /** The connection dropped: the wait before reopening, doubled for the next drop. */
  dropped(now: number): number {
    const wait = this.waitMs
    this.waitMs = Math.min(REOPEN_MAX_MS, wait * 2)
    this.quietUntil = now + wait
    return wait
  }
}
