import { TollgateError } from '@tollgate/core/lean'
import type { RedisClientLike } from '@tollgate/core/store'

/*
 * An @upstash/redis client in the shape RedisStore speaks to (RedisClientLike), so the scripts, their
 * batching, the reply checks and the deadlines are RedisStore's own, once, and only the transport differs:
 * each command or transaction is one HTTPS request of the Upstash REST protocol instead of a line on a TCP
 * connection. Nothing here opens, configures or closes the client: the store borrows it.
 */

/** What an Upstash transaction answers per command with `exec({ keepErrors: true })`. */
interface UpstashReply {
  result: unknown
  error?: string
}

/** The part of an @upstash/redis `multi()` transaction the store uses (sent as one `/multi-exec` request). */
export interface UpstashTransactionLike {
  incrby(key: string, increment: number): UpstashTransactionLike
  pexpire(key: string, milliseconds: number): UpstashTransactionLike
  exec(options: { keepErrors: true }): Promise<UpstashReply[]>
}

/**
 * The part of an @upstash/redis `Redis` the store uses, declared structurally so that this package imports
 * nothing of @upstash/redis at run time: the app's client works whichever of its entries (`@upstash/redis`,
 * `@upstash/redis/cloudflare`, `@upstash/redis/fastly`) it came from.
 */
export interface UpstashClientLike {
  /** A script run by EVALSHA, sent again as EVAL when the server answers NOSCRIPT (after a flush or a failover). */
  createScript(script: string): { exec(keys: string[], args: string[]): Promise<unknown> }
  multi(): UpstashTransactionLike
  del(...keys: string[]): Promise<number>
  get(key: string): Promise<unknown>
  set(key: string, value: string, options: { px: number }): Promise<unknown>
}

const METHODS = ['createScript', 'multi', 'del', 'get', 'set'] as const

type Transaction = ReturnType<RedisClientLike['multi']>
type Script = (numberOfKeys: number, ...keysAndArgs: Array<string | number>) => Promise<unknown>

/**
 * The client as RedisStore's `client`, or a TG_INVALID_OPTION error naming what it lacks. An ioredis or
 * node-redis client given here by mistake is refused too: RedisStore takes those itself.
 */
export function asRedisClient(client: unknown): RedisClientLike {
  const missing =
    client === null || typeof client !== 'object'
      ? [...METHODS]
      : METHODS.filter((m) => typeof (client as Record<string, unknown>)[m] !== 'function')
  if (missing.length > 0) {
    throw new TollgateError(
      `Invalid option "client": expected a Redis client of @upstash/redis (new Redis({ url, token }) or Redis.fromEnv()), ` +
        `got ${describe(client)}${missing.length < METHODS.length ? ` without ${missing.map((m) => `${m}()`).join(', ')}` : ''}` +
        '; for an ioredis or node-redis client, use RedisStore',
      'TG_INVALID_OPTION',
    )
  }
  return adapt(client as UpstashClientLike)
}

function adapt(upstash: UpstashClientLike): RedisClientLike {
  const adapted = {
    multi: () => transaction(upstash),
    del: (...keys: string[]) => upstash.del(...keys),
    // The client may have turned a number it read back into a number (its automatic deserialization).
    get: (key: string) => upstash.get(key).then((value) => (value === null || value === undefined ? null : String(value))),
    set: (key: string, value: string, _px: 'PX', milliseconds: string) => upstash.set(key, value, { px: Number(milliseconds) }),
    defineCommand(name: string, definition: { lua: string }) {
      const script = upstash.createScript(definition.lua)
      const run: Script = (numberOfKeys, ...keysAndArgs) => {
        const strings = keysAndArgs.map(String)
        return script.exec(strings.slice(0, numberOfKeys), strings.slice(numberOfKeys))
      }
      ;(adapted as unknown as Record<string, Script>)[name] = run
    },
  }
  return adapted
}

/**
 * RedisStore's fixed-window transaction (INCRBY and PEXPIRE per key) as one `/multi-exec` request, its
 * replies as ioredis gives them: `[error, value]` per command, so a refused command fails its own key.
 */
function transaction(upstash: UpstashClientLike): Transaction {
  const tx = upstash.multi()
  const queued: Transaction = {
    incrby(key, increment) {
      tx.incrby(key, Number(increment))
      return queued
    },
    pexpire(key, milliseconds) {
      tx.pexpire(key, Number(milliseconds))
      return queued
    },
    exec: () =>
      tx.exec({ keepErrors: true }).then((replies) => {
        // A reply that is not one answer per command is not read as counts: RedisStore fails the batch.
        if (!Array.isArray(replies)) return replies
        return replies.map((reply): [Error | null, unknown] =>
          reply !== null && typeof reply === 'object' && typeof reply.error === 'string'
            ? [new Error(reply.error), null]
            : [null, (reply as UpstashReply | null)?.result],
        )
      }),
  }
  return queued
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value)
  if (typeof value !== 'object') return `${String(value)} (${typeof value})`
  return `an object (${(value as object).constructor?.name ?? 'Object'})`
}
