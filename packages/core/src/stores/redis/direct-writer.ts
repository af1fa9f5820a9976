import { FIXED_WINDOW_REPLIES, fixedWindowCommands, type WindowWrite, windowKey } from '../../algorithms/fixed-window'
import { traced } from './node-builtins'
import { ClientTransactions, queuedReplyError, type TransactionSender } from './transaction'

/*
 * The fixed window's MULTI/EXEC written straight onto a standalone ioredis connection.
 *
 * `client.multi()` builds a Pipeline per transaction, and for every queued command chains two more
 * promises and a result slot on top of the command's own (Pipeline.sendCommand, fillResult): with
 * many clients that bookkeeping and the garbage it makes were most of a request's cost in
 * bench/store-bench.mjs.
 *
 * This writer sends the same bytes, in the same order, in one write: MULTI, fixedWindowCommands per key
 * (fixed-window.ts), EXEC, each an ioredis Command through the client's own `sendCommand` (ioredis's
 * documented way to send a built command), into one string written at once (TransactionStream).
 * What ioredis's transaction does beyond that is kept:
 * - each command is marked `inTransaction` and numbered (`pipelineIndex`), as Pipeline numbers them,
 *   so after a dropped connection ioredis aborts a half-answered transaction instead of resending its
 *   tail without its MULTI (event_handler.ts abortIncompletePipelines/abortTransactionFragments);
 * - a command Redis refused while queueing (NOPERM, OOM) is collected, and EXEC's EXECABORT carries
 *   them as `previousErrors`, which storeError names (deadline.ts);
 * - the client's `keyPrefix` applies to the keys, as it does to ioredis's own commands.
 * And one check it does not make: MULTI must be answered OK and each queued command QUEUED (or a
 * refusal). Anything else means the connection's replies are out of step with its commands, so every
 * later reply on it would answer another command: the transaction fails with a RedisProtocolError and
 * the batcher resets the client's connection (`reset`, ioredis reconnects).
 *
 * Used only where nothing changes what those commands are: a standalone ioredis client (a Cluster
 * routes each transaction by slot and retries redirects, which its Pipeline does), whose `multi` and
 * `sendCommand` are still ioredis's own. A `multi` replaced (a spy, a Proxy, a subclass), and a
 * tracer of ioredis's batches, are honoured per transaction: the store then goes through
 * `client.multi()` (see DirectWriter.usable).
 */

/** An ioredis Command (`new Command(name, args, options, callback)`): the part this writer sets and reads. */
interface CommandLike {
  inTransaction: boolean
  pipelineIndex?: number
  readonly promise: Promise<unknown>
}

type Callback = (error: Error | null, value?: unknown) => void
type CommandOptions = { keyPrefix?: string; replyEncoding: 'utf8' }
type CommandClass = new (name: string, args: string[], options?: CommandOptions, callback?: Callback) => CommandLike

/** The standalone ioredis client this writer sends on. */
interface DirectClient {
  multi(): never
  sendCommand(command: CommandLike, stream?: TransactionStream): unknown
  disconnect(reconnect?: boolean): void
  readonly isCluster?: boolean
  readonly stream?: { write(data: string | Uint8Array): unknown }
  readonly options?: { keyPrefix?: unknown }
}

const EMPTY: string[] = []
/**
 * Recent ioredis 5 releases report each MULTI sent through a Pipeline as one `ioredis:batch` trace
 * (their README, "diagnostics_channel"). While a tracer listens there, transactions go through the
 * Pipeline, so they keep showing as one batch each; their commands are traced either way.
 */
const BATCH_TRACES = 'tracing:ioredis:batch:start'

/**
 * ioredis's Command class, as ioredis exports it (`Redis.Command`), so that @tollgate/core imports no
 * ioredis and uses whichever copy built the client: a static of the client's class or of a class it
 * extends. ioredis mixes EventEmitter into Redis.prototype, `constructor` included, so a plain `Redis`
 * instance does not lead to its class; then the class is the one of the Command its command methods
 * hand to `sendCommand` (ioredis's documented way to send a built command), heard on a stand-in whose
 * `sendCommand` keeps it instead of sending it. Undefined when the client is not ioredis as this
 * writer knows it.
 */
function commandClassOf(client: object): CommandClass | undefined {
  for (
    let proto = Object.getPrototypeOf(client) as { constructor?: unknown } | null;
    proto !== null;
    proto = Object.getPrototypeOf(proto)
  ) {
    const Command = (proto.constructor as { Command?: unknown } | undefined)?.Command
    if (typeof Command === 'function') return Command as CommandClass
  }
  let built: unknown
  try {
    const standIn = Object.create(client) as { sendCommand(command: unknown): unknown; ping?: () => unknown }
    standIn.sendCommand = (command) => {
      built = (command as { constructor?: unknown } | null)?.constructor
      return undefined
    }
    standIn.ping?.()
  } catch {
    return undefined
  }
  return typeof built === 'function' ? (built as CommandClass) : undefined
}

/**
 * The client's `multi` when it is ioredis's own: the one on the prototype that defines `sendCommand`
 * (ioredis's Redis.prototype, or a subclass's that sends its own way), not replaced on the instance,
 * by a Proxy or by a subclass.
 */
function ioredisMulti(client: object): unknown {
  let proto = Object.getPrototypeOf(client) as Record<string, unknown> | null
  while (proto !== null && !Object.hasOwn(proto, 'sendCommand')) proto = Object.getPrototypeOf(proto) as Record<string, unknown> | null
  const multi = (client as Record<string, unknown>).multi
  if (proto === null || typeof multi !== 'function' || proto.multi !== multi) return undefined
  return (client as Record<string, unknown>).sendCommand === proto.sendCommand ? multi : undefined
}

export class DirectWriter extends ClientTransactions implements TransactionSender {
  /** The client's keyPrefix, and status replies (OK, QUEUED) read as text rather than bytes. */
  private readonly options: CommandOptions

  private constructor(
    private readonly client: DirectClient,
    private readonly Command: CommandClass,
    private readonly multi: unknown,
  ) {
    super(client)
    const prefix = client.options?.keyPrefix
    this.options = typeof prefix === 'string' && prefix !== '' ? { keyPrefix: prefix, replyEncoding: 'utf8' } : { replyEncoding: 'utf8' }
  }

  /** A writer for `client` when it is a standalone ioredis client with its own `multi` and `sendCommand`. */
  static of(client: object): DirectWriter | undefined {
    const c = client as Partial<DirectClient>
    traced(BATCH_TRACES) // on a Node without process.getBuiltinModule, starts loading the module now
    if (c.isCluster === true || typeof c.disconnect !== 'function') return undefined
    const multi = ioredisMulti(client)
    if (multi === undefined) return undefined
    const Command = commandClassOf(client)
    return Command === undefined ? undefined : new DirectWriter(c as DirectClient, Command, multi)
  }

  /**
   * Whether to write directly now: the client's `multi` is still the one found at construction (a
   * later spy goes through the spy), and no tracer listens for ioredis's batches (batchTraces).
   */
  get usable(): boolean {
    return this.client.multi === this.multi && !traced(BATCH_TRACES)
  }

  /** Sends MULTI, fixedWindowCommands per write, EXEC, in one write; EXEC's replies. */
  override send(writes: readonly WindowWrite[]): Promise<unknown[] | null> {
    const { client, Command, options } = this
    return new Promise((resolve, reject) => {
      const stream = new TransactionStream(client, writes.length)
      let index = 0
      let answered = 0
      let refused: Error[] | undefined
      // MULTI refused: the commands then ran outside a transaction, so their replies are not QUEUED.
      let outside = false
      // Replies come in the order the commands went: the n-th one heard answers the n-th command.
      const onQueued: Callback = (error, value) => {
        const position = answered++
        if (error !== null) {
          if (position === 0) outside = true
          if (refused === undefined) refused = [error]
          else refused.push(error)
          return
        }
        const mismatch = outside ? undefined : queuedReplyError(position, value)
        if (mismatch !== undefined) reject(mismatch)
      }
      const queue = (name: string, key: string, argument: string) => {
        const command = new Command(name, [key, argument], options, onQueued)
        command.inTransaction = true
        command.pipelineIndex = ++index
        client.sendCommand(command, stream)
      }
      const multi = new Command('multi', EMPTY, options, onQueued)
      multi.pipelineIndex = 0
      client.sendCommand(multi, stream)
      for (const write of writes) fixedWindowCommands(windowKey(write), write.total, write.ttlMs, queue)
      const exec = new Command('exec', EMPTY)
      exec.inTransaction = true
      exec.pipelineIndex = ++index
      client.sendCommand(exec, stream)
      exec.promise.then(
        (value) => resolve(value as unknown[] | null),
        (error: unknown) => {
          if (error instanceof Error && refused !== undefined) (error as Error & { previousErrors?: Error[] }).previousErrors = refused
          reject(error)
        },
      )
    })
  }
}

/**
 * Where ioredis writes one transaction's commands (its `sendCommand(command, stream)` with a
 * pipeline's stream, as Pipeline does): collected into one string and written on the client's
 * connection once the last arrives, so the transaction costs one socket write. ioredis calls it
 * again with the same commands when it resends them on a new connection after a reconnect (or from
 * its offline queue), so it counts down anew after each write, to the connection of that moment.
 */
class TransactionStream {
  readonly isPipeline = true
  readonly destination: { readonly redis: DirectClient }
  private data = ''
  /** Set only if a command came as bytes (a Buffer argument; none does here): the parts so far, in order. */
  private parts: Uint8Array[] | undefined
  private pending: number

  constructor(
    client: DirectClient,
    keys: number,
    /** MULTI, fixedWindowCommands per key, EXEC. */
    private readonly total = FIXED_WINDOW_REPLIES * keys + 2,
  ) {
    this.destination = { redis: client }
    this.pending = total
  }

  write(writable: string | Uint8Array): void {
    if (typeof writable === 'string') this.data += writable
    else {
      this.parts ??= []
      this.parts.push(Buffer.from(this.data), writable)
      this.data = ''
    }
    if (--this.pending > 0) return
    const out = this.parts === undefined ? this.data : Buffer.concat([...this.parts, Buffer.from(this.data)])
    this.data = ''
    this.parts = undefined
    this.pending = this.total
    this.destination.redis.stream?.write(out)
  }
}
