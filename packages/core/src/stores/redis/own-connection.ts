import type { Socket } from 'node:net'
import { FIXED_WINDOW_REPLIES, type FixedWindowCommand, fixedWindowCommands, type WindowWrite } from '../../algorithms/fixed-window'
import { preloadSockets, traced } from './node-builtins'
import { ReplyReader } from './resp-reader'
import { describeReply, RedisProtocolError, type TransactionSender } from './transaction'
import { command, DueReplies, EXEC, MULTI, type Pending, settle } from './wire-replies'
import { type ClientOptions, connectLike, followable, ReopenBackoff, setupCommands, type WireClient } from './wire-setup'

/*
 * The fixed window's MULTI/EXEC on a connection of the store's own (`transport: 'own-connection'`, opt-in).
 *
 * Through ioredis, even written straight onto its connection (direct-writer.ts), each key of a batch
 * costs two ioredis Commands: their argument arrays, promises and callbacks, the command queue and the
 * reply dispatch. This connection writes the same commands (MULTI, fixedWindowCommands per key, EXEC)
 * as one string, and reads the replies with a RESP2 reader (resp-reader.ts), with one pending entry per
 * transaction, not per command. What that saves is measured in bench/store-bench.mjs (docs/guides/redis.md).
 *
 * It is the client's shadow, never a second client to configure:
 * - opened to the server the client connects to, with its settings: host and port or path, family,
 *   TLS options, AUTH with its username and password, SELECT of its db, named `tollgate` in CLIENT LIST;
 * - opened when the client is ready, closed when the client's connection closes (so `client.quit()`
 *   ends both), reopened when the client is ready again; it never keeps the process alive (unref);
 * - used only while it and the client are ready, the client still has the db it was built with, and
 *   no tracer listens to ioredis's commands or batches; any other time the store writes straight onto
 *   the client's connection (direct-writer.ts), so a transaction never waits for this connection;
 * - ready only once it has answered two round trips of its own: its setup (AUTH, SELECT, PING), then
 *   CLIENT SETNAME, written after PING's reply. A connection's first exchange proves little: a path that
 *   went silent may well let a new connection's opening through (a proxy that accepts and stalls, a
 *   middlebox that drops a flow once it carries traffic), and a connection that goes silent under live
 *   transactions costs every request on them their deadline, and the limiter then skips the store for
 *   a while. Both round trips are what it sent at open anyway, so the probation adds no traffic and
 *   costs one round trip of waiting, during which the client carries the transactions;
 * - as alive as the client: TCP keep-alive on its socket (as ioredis sets on its own), and, since a
 *   half-open socket (a NAT or firewall that dropped its state) stays silent for as long as the kernel
 *   retransmits, a liveness rule: a transaction that misses its deadline here (`missed`), or no byte
 *   back for SILENT_MS while anything waits for a reply (its setup included, once the socket is
 *   connected), closes it. Meanwhile the client carries the transactions, so the store never keeps
 *   writing into a silent socket;
 * - reopened after a backoff that doubles with each drop of a connection that has not yet proven
 *   itself (REOPEN_MIN_MS to REOPEN_MAX_MS), and falls back to the shortest once one has (PROVEN_MS):
 *   a path that went silent often stays silent for new connections too, and the probation above
 *   cannot catch a path that drops a flow later than its second round trip, so each try of such a
 *   path must come more rarely than the last;
 * - a reply that does not fit its command (MULTI not OK, a queued command not QUEUED, EXEC's replies
 *   not the transaction's, a byte the reader cannot follow, a reply nobody waits for) closes it too:
 *   what it reads next could only be matched to the wrong transaction;
 * - a connection lost with transactions in flight fails them at once (never resends: EXEC may have run),
 *   and the limiter's failure policy answers those requests, as for any failed call;
 * - one per client, however many stores share the client. Sentinel clients and clients with their own
 *   Connector are left on ioredis (the server they reach is theirs to find), as is every Cluster.
 */

const COMMAND_TRACES = 'tracing:ioredis:command:start'
const BATCH_TRACES = 'tracing:ioredis:batch:start'

/**
 * How long the connection may stay silent while a reply is due before it counts as lost. Far beyond
 * any round trip of these commands, and far below the minutes a kernel retransmits into a dead peer.
 */
export const SILENT_MS = 1000

const connections = new WeakMap<object, WireConnection | null>()

export class WireConnection implements TransactionSender {
  private socket: Socket | undefined
  /** The current socket connected (TCP, and TLS when set): from then on, a reply due and not heard counts as silence. */
  private connected = false
  /** The current socket answered its setup and its name: transactions may go on it. */
  private ready = false
  /** The replies due, in order (wire-replies.ts). */
  private readonly due = new DueReplies()
  /** When to reopen after a drop (wire-setup.ts). */
  private readonly backoff = new ReopenBackoff()
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
      preloadSockets()
      known = followable(client) ? new WireConnection(client, client.options) : null
      connections.set(client, known)
    }
    return known ?? undefined
  }

  /** Whether the store's next transaction goes here: both connections ready, the same db, no tracer of ioredis listening. */
  get usable(): boolean {
    if (!this.ready || this.client.status !== 'ready' || traced(COMMAND_TRACES) || traced(BATCH_TRACES)) return false
    const select = this.client.condition?.select
    return select === undefined || select === this.db
  }

  /** Writes MULTI, fixedWindowCommands per write, EXEC, as one string; EXEC's replies. */
  send(writes: readonly WindowWrite[]): Promise<unknown[] | null> {
    const socket = this.socket
    if (socket === undefined || !this.ready) return Promise.reject(new Error("Tollgate's Redis connection is not open"))
    const { prefix, prefixBytes } = this
    this.out = MULTI
    let index = -1
    let suffix = ''
    for (const write of writes) {
      // The keys of one batch nearly always share their window index: its `:<index>` is built once.
      if (write.index !== index) {
        index = write.index
        suffix = `:${index}`
      }
      const { stem } = write
      const key = `$${prefixBytes + Buffer.byteLength(stem) + suffix.length}\r\n${prefix}${stem}${suffix}\r\n`
      fixedWindowCommands(key, write.total, write.ttlMs, this.append)
    }
    const out = this.out + EXEC
    this.out = ''
    const pending = this.enqueue(FIXED_WINDOW_REPLIES * writes.length + 2, true)
    socket.write(out)
    return pending.promise as Promise<unknown[] | null>
  }

  /** The transaction being written (send). */
  private out = ''

  /** One command of fixedWindowCommands, its key already a RESP bulk string (ASCII command and argument). */
  private readonly append = (command: FixedWindowCommand, key: string, argument: string): void => {
    this.out += `*3\r\n$${command.length}\r\n${command}\r\n${key}$${argument.length}\r\n${argument}\r\n`
  }

  /** The connection's replies no longer fit its commands: closed, its transactions failed with `error`. */
  reset(error: Error): void {
    this.socket?.destroy(error)
  }

  /** A transaction here missed its deadline while replies are due: the connection counts as lost. */
  missed(): void {
    if (this.due.head !== undefined) this.socket?.destroy(new Error('a transaction on it missed its deadline'))
  }

  private enqueue(replies: number, transaction: boolean): Pending {
    const pending = this.due.add(replies, transaction)
    this.watchdog ??= setTimeout(this.checkSilence, SILENT_MS).unref()
    return pending
  }

  /** Runs while replies are due (SILENT_MS apart at most): closes a connection silent that long. */
  private watchdog: NodeJS.Timeout | undefined
  /** When the current socket last showed life: it connected, or bytes came in. */
  private heardAt = 0

  private readonly checkSilence = (): void => {
    this.watchdog = undefined
    const waiting = this.due.head
    if (waiting === undefined || this.socket === undefined) return
    // Until the socket connects, connectTimeout bounds the wait (open), as ioredis bounds its own.
    if (!this.connected) {
      this.watchdog = setTimeout(this.checkSilence, SILENT_MS).unref()
      return
    }
    // Silence counts from the last sign of life or the oldest wait, whichever came later.
    const silent = Date.now() - Math.max(this.heardAt, waiting.sentAt)
    if (silent >= SILENT_MS) {
      this.socket.destroy(new Error(`no reply for ${silent} ms`))
      return
    }
    this.watchdog = setTimeout(this.checkSilence, SILENT_MS - silent).unref()
  }

  /**
   * The client (re)connected: its settings may work again (a password restored), so try anew, once
   * the wait after this connection's last drop is over: the client's connection answering says
   * nothing of whether this one's path still drops it.
   */
  private readonly clientReady = (): void => {
    this.refused = false
    const wait = this.backoff.quietUntil - Date.now()
    if (wait > 0) this.reopenIn(wait)
    else this.open()
  }

  private reopenIn(ms: number): void {
    clearTimeout(this.reopenTimer)
    this.reopenTimer = setTimeout(this.open, ms)
    this.reopenTimer.unref()
  }

  private readonly open = (): void => {
    clearTimeout(this.reopenTimer)
    this.reopenTimer = undefined
    if (this.socket !== undefined || this.client.status !== 'ready') return
    const o = this.options
    const socket = connectLike(o)
    if (socket === undefined) return // the client's own connection stays in use
    this.socket = socket
    const timeoutMs = typeof o.connectTimeout === 'number' && o.connectTimeout > 0 ? o.connectTimeout : 10_000
    const connectTimer = setTimeout(() => socket.destroy(new Error('connect timed out')), timeoutMs)
    connectTimer.unref()
    socket.once(o.tls ? 'secureConnect' : 'connect', () => {
      clearTimeout(connectTimer)
      if (this.socket !== socket) return
      this.connected = true
      this.heardAt = Date.now()
    })
    let lastError: Error | undefined
    socket.on('error', (error) => {
      lastError = error
    })
    // A reader per socket: bytes left from a dropped connection never run into the next one's.
    const reader = new ReplyReader()
    socket.on('data', (chunk: Buffer) => {
      this.heardAt = Date.now()
      reader.feed(chunk, this.onReply, this.onProtocolError)
    })
    socket.on('close', () => {
      clearTimeout(connectTimer)
      if (this.socket === socket) this.dropped(lastError)
    })
    const { setup, replies } = setupCommands(o, this.db)
    // Refused (a wrong password, a db it may not select): closed, and the client's own connection stays in use.
    const refuse = (): void => {
      clearTimeout(connectTimer)
      if (this.socket !== socket) return
      this.refused = true
      socket.destroy()
    }
    const greeted = this.enqueue(replies, false)
    greeted.promise.then((pong) => {
      if (greeted.errors !== undefined) return refuse()
      if (this.socket !== socket) return
      if (pong !== 'PONG') {
        socket.destroy(new RedisProtocolError(`PING was answered ${describeReply(pong)}, not PONG`))
        return
      }
      // Named for CLIENT LIST, and its reply is the second round trip the connection must answer before
      // it takes transactions (see the top of this file); a user who may not run CLIENT leaves it unnamed,
      // and that refusal is an answer too.
      const named = this.enqueue(1, false)
      const admit = (): void => {
        if (this.socket !== socket) return // closed before the answer: dropped() failed `named`
        this.ready = true
        this.backoff.ready(Date.now())
      }
      named.promise.then(admit, admit)
      socket.write(command('CLIENT', 'SETNAME', 'tollgate'))
    }, refuse)
    socket.write(setup)
  }

  /** The socket closed: every transaction on it fails now; reopened after the backoff while the client stays ready. */
  private dropped(cause: Error | undefined): void {
    this.socket = undefined
    this.connected = false
    this.ready = false
    clearTimeout(this.watchdog)
    this.watchdog = undefined
    const error =
      cause instanceof RedisProtocolError
        ? cause
        : new Error(`Tollgate's Redis connection closed before the reply${cause === undefined ? '' : `: ${cause.message}`}`)
    this.due.failAll(error)
    // Not reopened from here when refused, or when the client is down too (Redis went away, or quit):
    // that drop is the client's outage, not this connection's path, and clientReady opens it again.
    if (this.refused || this.client.status !== 'ready' || this.reopenTimer !== undefined) return
    this.reopenIn(this.backoff.dropped(Date.now()))
  }

  /** The client's connection closed (Redis went away, or `quit()`): this one closes with it, until the client is ready again. */
  private readonly closeWithClient = (): void => {
    clearTimeout(this.reopenTimer)
    this.reopenTimer = undefined
    this.socket?.destroy()
  }

  private readonly onReply = (value: unknown): void => {
    const pending = this.due.hear(value, this.onProtocolError)
    if (pending === undefined) return
    if (pending.transaction) this.backoff.answered(Date.now())
    settle(pending, value)
  }

  /** A reply this reader cannot follow, or one that does not fit its command: the connection can no longer be trusted. */
  private readonly onProtocolError = (error: Error): void => {
    this.socket?.destroy(error instanceof RedisProtocolError ? error : new RedisProtocolError(error.message))
  }
}
