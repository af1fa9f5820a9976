import { channel } from 'node:diagnostics_channel'
import { FIXED_WINDOW_COUNT_REPLY, FIXED_WINDOW_REPLIES, type RedisTransactionLike } from '../algorithms/fixed-window'

/*
 * The fixed window's MULTI/EXEC written straight onto a standalone ioredis connection (issue 17).
 *
 * `client.multi()` builds a Pipeline per transaction, and for every queued command chains two more
 * promises and a result slot on top of the command's own (Pipeline.sendCommand, fillResult). Under
 * 10,000 clients on Redis that bookkeeping was most of a request's cost: per request, 2.5× the CPU of
 * sending the same commands through `client.sendCommand(new Command(...))` (bench/store-bench.mjs),
 * and the garbage it makes was 11% of busy samples against 2.5% for @fastify/rate-limit.
 *
 * This writer sends the same bytes, in the same order, in one write: MULTI, then INCRBY and PEXPIRE
 * per key, then EXEC, each an ioredis Command through the client's own `sendCommand` (ioredis's
 * documented way to send a built command), into one string written at once (TransactionStream).
 * What ioredis's transaction does beyond that is kept:
 * - each command is marked `inTransaction` and numbered (`pipelineIndex`), as Pipeline numbers them,
 *   so after a dropped connection ioredis aborts a half-answered transaction instead of resending its
 *   tail without its MULTI (event_handler.ts abortIncompletePipelines/abortTransactionFragments);
 * - a command Redis refused while queueing (NOPERM, OOM) is collected, and EXEC's EXECABORT carries
 *   them as `previousErrors`, which storeError names (redis-deadline.ts);
 * - the client's `keyPrefix` applies to the keys, as it does to ioredis's own commands;
 * - EXEC's replies come back as ioredis's `[error, value]` pairs, only for the INCRBY replies the
 *   batcher reads (FIXED_WINDOW_COUNT_REPLY): a PEXPIRE reply cannot fail once its INCRBY succeeded.
 *
 * Used only where nothing changes what those commands are: a standalone ioredis client (a Cluster
 * routes each transaction by slot and retries redirects, which its Pipeline does), whose `multi` and
 * `sendCommand` are still ioredis's own. A `multi` replaced (a spy, a Proxy, a subclass), and a
 * tracer of ioredis's batches, are honoured per transaction: the store then goes through
 * `client.multi()` (see DirectWriter.usable).
 */

/** An ioredis Command (`new Command(name, args, options, callback)`): the part this writer sets and reads. */
export interface CommandLike {
  inTransaction: boolean
  pipelineIndex?: number
  readonly promise: Promise<unknown>
}

export type Callback = (error: Error | null, value?: unknown) => void
type CommandClass = new (name: string, args: string[], options?: { keyPrefix?: string }, callback?: Callback) => CommandLike

/** The standalone ioredis client this writer sends on. */
interface DirectClient {
  multi: unknown
  sendCommand(command: CommandLike, stream?: TransactionStream): unknown
  pipeline(): { ping(): unknown; _queue?: Array<{ constructor: unknown }> }
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
const batchTraces = channel('tracing:ioredis:batch:start')

/**
 * ioredis's Command class, taken from the client's own ioredis (a command its pipeline builds), so that
 * @tollgate/core imports no ioredis and uses whichever copy built the client. Undefined when the client
 * is not ioredis as this writer knows it.
 */
function commandClassOf(client: DirectClient): CommandClass | undefined {
  try {
    const pipeline = client.pipeline()
    pipeline.ping()
    const built = pipeline._queue?.[0]?.constructor
    return typeof built === 'function' ? (built as CommandClass) : undefined
  } catch {
    return undefined
  }
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

export class DirectWriter implements TransactionSender {
  private readonly prefixed: { keyPrefix: string } | undefined

  private constructor(
    private readonly client: DirectClient,
    private readonly Command: CommandClass,
    private readonly multi: unknown,
  ) {
    const prefix = client.options?.keyPrefix
    this.prefixed = typeof prefix === 'string' && prefix !== '' ? { keyPrefix: prefix } : undefined
  }

  /** A writer for `client` when it is a standalone ioredis client with its own `multi` and `sendCommand`. */
  static of(client: object): DirectWriter | undefined {
    const c = client as Partial<DirectClient>
    if (c.isCluster === true || typeof c.pipeline !== 'function') return undefined
    const multi = ioredisMulti(client)
    if (multi === undefined) return undefined
    const Command = commandClassOf(c as DirectClient)
    return Command === undefined ? undefined : new DirectWriter(c as DirectClient, Command, multi)
  }

  /**
   * Whether to write directly now: the client's `multi` is still the one found at construction (a
   * later spy goes through the spy), and no tracer listens for ioredis's batches (batchTraces).
   */
  get usable(): boolean {
    return this.client.multi === this.multi && !batchTraces.hasSubscribers
  }

  transaction(): RedisTransactionLike {
    return transactionOn(this)
  }

  /** Sends MULTI, `commands`, EXEC in one write; EXEC's command promise. */
  send(commands: string[], onQueued: Callback): Promise<unknown> {
    const { client, Command, prefixed } = this
    const stream = new TransactionStream(client, commands.length / KEY_FIELDS)
    const multi = new Command('multi', EMPTY, undefined, onQueued)
    multi.pipelineIndex = 0
    client.sendCommand(multi, stream)
    let index = 1
    for (let i = 0; i < commands.length; i += KEY_FIELDS) {
      const key = commands[i + 1]! + commands[i + 2]!
      const incr = new Command('incrby', [key, commands[i]!], prefixed, onQueued)
      incr.inTransaction = true
      incr.pipelineIndex = index++
      client.sendCommand(incr, stream)
      const pexpire = new Command('pexpire', [key, commands[i + 3]!], prefixed, onQueued)
      pexpire.inTransaction = true
      pexpire.pipelineIndex = index++
      client.sendCommand(pexpire, stream)
    }
    const exec = new Command('exec', EMPTY)
    exec.inTransaction = true
    exec.pipelineIndex = index
    client.sendCommand(exec, stream)
    return exec.promise
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
    /** MULTI, INCRBY and PEXPIRE per key, EXEC. */
    private readonly total = 2 * keys + 2,
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

/**
 * What sends one fixed-window transaction: MULTI, then INCRBY and PEXPIRE per key of `commands`, then
 * EXEC. `commands` holds KEY_FIELDS strings per key: [cost, stem, suffix, ttl], the key being the stem
 * and its suffix (`:<window index>`) written one after the other, so no key string is built for a
 * sender that writes the bytes itself. `onQueued` hears each reply to a queued command; the promise is
 * EXEC's reply, an array of the commands' replies (an Error for one that failed).
 */
export interface TransactionSender {
  send(commands: string[], onQueued: Callback): Promise<unknown>
}

/** Strings per key in a TransactionSender's `commands`. */
export const KEY_FIELDS = 4

/** A transaction for the batcher that `sender` sends (DirectWriter on ioredis, WireConnection on its own socket). */
export function transactionOn(sender: TransactionSender): RedisTransactionLike {
  return new DirectTransaction(sender)
}

/**
 * One transaction for the batcher (RedisTransactionLike): the keys collected, sent at exec(). A PEXPIRE
 * always follows its key's INCRBY (addFixedWindow), so each key is kept once, as [cost, stem, suffix, ttl].
 */
class DirectTransaction implements RedisTransactionLike {
  private readonly commands: string[] = []
  /** Commands Redis refused while queueing, for EXECABORT's previousErrors. */
  private refused: Error[] | undefined
  /** The last window index's suffix: the keys of one batch nearly always share it. */
  private index = -1
  private suffix = ''

  constructor(private readonly writer: TransactionSender) {}

  window(stem: string, index: number, cost: number, ttlMs: number): void {
    if (index !== this.index) {
      this.index = index
      this.suffix = `:${index}`
    }
    this.commands.push(String(cost), stem, this.suffix, String(ttlMs))
  }

  incrby(key: string, increment: string): RedisTransactionLike {
    this.commands.push(increment, key, '', '')
    return this
  }

  pexpire(_key: string, milliseconds: string): RedisTransactionLike {
    this.commands[this.commands.length - 1] = milliseconds
    return this
  }

  exec(): Promise<Array<[Error | null, unknown]> | null> {
    return this.writer.send(this.commands, this.onQueued).then(this.replies, this.aborted)
  }

  private readonly onQueued: Callback = (error) => {
    if (error === null) return
    if (this.refused === undefined) this.refused = [error]
    else this.refused.push(error)
  }

  /** EXEC's replies as ioredis's pairs at the INCRBY positions (FIXED_WINDOW_COUNT_REPLY); null when it aborted. */
  private readonly replies = (value: unknown): Array<[Error | null, unknown]> | null => {
    if (!Array.isArray(value)) return null
    const pairs = new Array<[Error | null, unknown]>(value.length)
    for (let i = FIXED_WINDOW_COUNT_REPLY; i < value.length; i += FIXED_WINDOW_REPLIES) {
      const reply: unknown = value[i]
      pairs[i] = reply instanceof Error ? [reply, null] : [null, reply]
    }
    return pairs
  }

  private readonly aborted = (error: unknown): never => {
    if (error instanceof Error && this.refused !== undefined) (error as Error & { previousErrors?: Error[] }).previousErrors = this.refused
    throw error
  }
}
