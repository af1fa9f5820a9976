import { channel } from 'node:diagnostics_channel'
import { createConnection, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import type { RedisTransactionLike } from '../algorithms/fixed-window'
import { type Callback, KEY_FIELDS, type TransactionSender, transactionOn } from './redis-direct'
import { ReplyReader } from './resp-reader'

/*
 * The fixed window's MULTI/EXEC on a connection of the store's own (issue 17).
 *
 * Through ioredis, even written straight onto its connection (redis-direct.ts), each key of a batch
 * costs two ioredis Commands: their argument arrays, promises and callbacks, the command queue and the
 * reply dispatch. With 10,000 clients every request is its own key, and that was ~2.6 µs of Node CPU
 * per request against ~0.4 µs for the rest of the store (bench/store-bench.mjs: 3.7 µs per decision
 * through ioredis Commands, 1.1 µs for the same bytes on a bare socket). This connection writes the
 * same bytes (MULTI, INCRBY and PEXPIRE per key, EXEC) as one string, and reads the replies with a
 * RESP2 reader (resp-reader.ts), with one pending entry per transaction, not per command.
 *
 * It is the client's shadow, never a second client to configure:
 * - opened to the server the client connects to, with its settings: host and port or path, family,
 *   TLS options, AUTH with its username and password, SELECT of its db, named `tollgate` in CLIENT LIST;
 * - opened when the client is ready, closed when the client's connection closes (so `client.quit()`
 *   ends both), reopened when the client is ready again; it never keeps the process alive (unref);
 * - used only while it and the client are ready, the client still has the db it was built with, and
 *   no tracer listens to ioredis's commands or batches; any other time the store writes through the
 *   client as before (redis-direct.ts), so a transaction never waits for this connection;
 * - a connection lost with transactions in flight fails them at once (never resends: EXEC may have run),
 *   and the limiter's failure policy answers those requests, as for any failed call;
 * - one per client, however many stores share the client. Sentinel clients and clients with their own
 *   Connector are left on ioredis (the server they reach is theirs to find), as is every Cluster.
 * `new RedisStore({ client, ownConnection: false })` keeps every command on the client.
 */

/** The part of a standalone ioredis client the connection reads: its settings, its state and its events. */
interface WireClient {
  readonly status?: string
  readonly options?: ClientOptions
  /** ioredis's current database (it follows `client.select()`); the settings' db when absent. */
  readonly condition?: { readonly select?: unknown }
  on(event: string, listener: () => void): unknown
}

interface ClientOptions {
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
}

const commandTraces = channel('tracing:ioredis:command:start')
const batchTraces = channel('tracing:ioredis:batch:start')

/** After this connection drops while the client stays ready: the first wait before reopening, and the longest. */
const REOPEN_MIN_MS = 500
const REOPEN_MAX_MS = 30_000

const connections = new WeakMap<object, WireConnection | null>()

/** RESP for one command; `args` ASCII-free or not, lengths in bytes. */
function command(...args: string[]): string {
  let out = `*${args.length}\r\n`
  for (const arg of args) out += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`
  return out
}

const MULTI = command('MULTI')
const EXEC = command('EXEC')

/** A transaction (or the connection's setup) waiting for its replies, in the order they come. */
class Pending {
  next: Pending | undefined
  resolve!: (value: unknown) => void
  reject!: (error: unknown) => void
  readonly promise: Promise<unknown>
  constructor(
    /** Replies still to come; the last one settles the promise. */
    public left: number,
    readonly onQueued: Callback | undefined,
  ) {
    this.promise = new Promise<unknown>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
  }
}

export class WireConnection implements TransactionSender {
  private socket: Socket | undefined
  private ready = false
  private head: Pending | undefined
  private tail: Pending | undefined
  private reopenMs = REOPEN_MIN_MS
  private reopenTimer: NodeJS.Timeout | undefined
  /** Redis refused the setup (AUTH, SELECT): not tried again until the client is ready again. */
  private refused = false
  private readonly prefix: string
  private readonly prefixBytes: number
  private readonly db: number

  private constructor(
    private readonly client: WireClient,
    private readonly options: ClientOptions,
  ) {
    this.prefix = typeof options.keyPrefix === 'string' ? options.keyPrefix : ''
    this.prefixBytes = Buffer.byteLength(this.prefix)
    this.db = typeof options.db === 'number' ? options.db : 0
    client.on('ready', this.clientReady)
    client.on('close', this.closeWithClient)
    client.on('end', this.closeWithClient)
    if (client.status === 'ready') this.open()
  }

  /** The connection for a standalone ioredis `client` (one per client), or undefined when it is not one this can follow. */
  static of(client: object): WireConnection | undefined {
    let known = connections.get(client)
    if (known === undefined) {
      const c = client as Partial<WireClient>
      const options = c.options
      const eligible =
        typeof c.on === 'function' &&
        options !== null &&
        typeof options === 'object' &&
        options.sentinels == null &&
        options.Connector == null &&
        (typeof options.path === 'string' || typeof options.port === 'number')
      known = eligible ? new WireConnection(c as WireClient, options) : null
      connections.set(client, known)
    }
    return known ?? undefined
  }

  /** Whether the store's next transaction goes here: both connections ready, the same db, no tracer of ioredis listening. */
  get usable(): boolean {
    if (!this.ready || this.client.status !== 'ready' || commandTraces.hasSubscribers || batchTraces.hasSubscribers) return false
    const select = this.client.condition?.select
    return select === undefined || select === this.db
  }

  transaction(): RedisTransactionLike {
    return transactionOn(this)
  }

  /** Writes MULTI, INCRBY and PEXPIRE per [cost, key, ttl] of `commands`, EXEC, as one string; EXEC's reply. */
  send(commands: string[], onQueued: Callback): Promise<unknown> {
    const socket = this.socket
    if (socket === undefined || !this.ready) return Promise.reject(new Error("Tollgate's Redis connection is not open"))
    const { prefix, prefixBytes } = this
    let out = MULTI
    for (let i = 0; i < commands.length; i += KEY_FIELDS) {
      const cost = commands[i]!
      const stem = commands[i + 1]!
      const suffix = commands[i + 2]! // ASCII: `:<window index>`
      const ttl = commands[i + 3]!
      const k = `$${prefixBytes + Buffer.byteLength(stem) + suffix.length}\r\n${prefix}${stem}${suffix}\r\n`
      out += `*3\r\n$6\r\nINCRBY\r\n${k}$${cost.length}\r\n${cost}\r\n*3\r\n$7\r\nPEXPIRE\r\n${k}$${ttl.length}\r\n${ttl}\r\n`
    }
    out += EXEC
    const pending = this.enqueue((2 * commands.length) / KEY_FIELDS + 2, onQueued)
    socket.write(out)
    return pending.promise
  }

  private enqueue(replies: number, onQueued: Callback | undefined): Pending {
    const pending = new Pending(replies, onQueued)
    if (this.tail === undefined) this.head = pending
    else this.tail.next = pending
    this.tail = pending
    return pending
  }

  /** The client (re)connected: its settings may work again (a password restored), so try anew. */
  private readonly clientReady = (): void => {
    this.refused = false
    this.open()
  }

  private readonly open = (): void => {
    clearTimeout(this.reopenTimer)
    this.reopenTimer = undefined
    if (this.socket !== undefined || this.client.status !== 'ready') return
    const o = this.options
    const target: Record<string, unknown> =
      typeof o.path === 'string' ? { path: o.path } : { port: o.port, host: o.host ?? 'localhost', family: o.family }
    let socket: Socket
    try {
      // As ioredis connects: TLS whenever `tls` is set (a rediss:// URL sets it to true), its options over the target.
      const tls = o.tls ? { ...target, ...(typeof o.tls === 'object' ? o.tls : {}) } : undefined
      socket = tls === undefined ? createConnection(target as { port: number }) : tlsConnect(tls)
    } catch {
      return // the client's own connection stays in use
    }
    this.socket = socket
    socket.setNoDelay(true)
    socket.unref()
    const timeoutMs = typeof o.connectTimeout === 'number' && o.connectTimeout > 0 ? o.connectTimeout : 10_000
    const connectTimer = setTimeout(() => socket.destroy(new Error('connect timed out')), timeoutMs)
    connectTimer.unref()
    let lastError: Error | undefined
    socket.on('error', (error) => {
      lastError = error
    })
    // A reader per socket: bytes left from a dropped connection never run into the next one's.
    const reader = new ReplyReader()
    socket.on('data', (chunk: Buffer) => reader.feed(chunk, this.onReply, this.onProtocolError))
    socket.on('close', () => {
      clearTimeout(connectTimer)
      if (this.socket === socket) this.dropped(lastError)
    })
    // Setup, pipelined: AUTH as the client authenticates, SELECT its db, then PING; ready at PING's reply.
    let setup = ''
    let replies = 1
    if (typeof o.password === 'string' && o.password !== '') {
      setup += typeof o.username === 'string' && o.username !== '' ? command('AUTH', o.username, o.password) : command('AUTH', o.password)
      replies++
    }
    if (this.db !== 0) {
      setup += command('SELECT', String(this.db))
      replies++
    }
    setup += command('PING')
    let refused: Error | undefined
    const ready = this.enqueue(replies, (error) => {
      refused ??= error ?? undefined
    })
    // Refused (a wrong password, a db it may not select): closed, and the client's own connection stays in use.
    const refuse = (): void => {
      clearTimeout(connectTimer)
      if (this.socket !== socket) return
      this.refused = true
      socket.destroy()
    }
    ready.promise.then(() => {
      if (refused !== undefined) return refuse()
      clearTimeout(connectTimer)
      if (this.socket !== socket) return
      this.ready = true
      this.reopenMs = REOPEN_MIN_MS
      // Named for CLIENT LIST; a user who may not run CLIENT just leaves it unnamed.
      this.enqueue(1, undefined).promise.catch(() => {})
      socket.write(command('CLIENT', 'SETNAME', 'tollgate'))
    }, refuse)
    socket.write(setup)
  }

  /** The socket closed: every transaction on it fails now; reopened later while the client stays ready. */
  private dropped(cause: Error | undefined): void {
    this.socket = undefined
    this.ready = false
    const error = new Error(`Tollgate's Redis connection closed before the reply${cause === undefined ? '' : `: ${cause.message}`}`)
    for (let p = this.head; p !== undefined; p = p.next) p.reject(error)
    this.head = this.tail = undefined
    if (!this.refused && this.client.status === 'ready' && this.reopenTimer === undefined) {
      this.reopenTimer = setTimeout(this.open, this.reopenMs)
      this.reopenTimer.unref()
      this.reopenMs = Math.min(REOPEN_MAX_MS, this.reopenMs * 2)
    }
  }

  /** The client's connection closed (Redis went away, or `quit()`): this one closes with it, until the client is ready again. */
  private readonly closeWithClient = (): void => {
    clearTimeout(this.reopenTimer)
    this.reopenTimer = undefined
    this.socket?.destroy()
  }

  private readonly onReply = (value: unknown): void => {
    const pending = this.head
    if (pending === undefined) {
      this.onProtocolError()
      return
    }
    if (--pending.left > 0) {
      if (value instanceof Error) pending.onQueued?.(value)
      return
    }
    this.head = pending.next
    if (this.head === undefined) this.tail = undefined
    if (value instanceof Error) pending.reject(value)
    else pending.resolve(value)
  }

  /** A reply this reader cannot follow, or one nobody waits for: the connection can no longer be trusted. */
  private readonly onProtocolError = (): void => {
    this.socket?.destroy(new Error('unexpected reply from Redis'))
  }
}
