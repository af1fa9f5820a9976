import { type Duration, RedisStore, TollgateError } from '@tollgate/core/lean'
import { asRedisClient, type UpstashClientLike } from './client'

export interface UpstashStoreOptions {
  /**
   * An @upstash/redis client: `new Redis({ url, token })` or `Redis.fromEnv()`. The store borrows it and
   * sends its commands through it (its retries, its keep-alive, its read-your-writes token); it adds no
   * request of its own beyond the ones each decision needs.
   */
  client: UpstashClientLike
  /**
   * Deadline for one store call. A reply later than this is ignored and the limiter applies its
   * `onStoreError` policy. Longer than RedisStore's default: each call is an HTTPS request, and one to a
   * database in another region, on a fresh connection, takes a few hundred ms.
   * @default "500ms"
   */
  timeout?: Duration
  /**
   * Send the decisions of one event-loop turn in one request (one script run, or one transaction), each
   * still counted at its own place in the count. Off, each decision is a request of its own.
   * @default true
   */
  batch?: boolean
}

const OPTION_KEYS = ['client', 'timeout', 'batch']

/**
 * Counts in Redis over HTTP, through the Upstash REST protocol and the app's @upstash/redis client: the
 * same keys, Lua scripts and decisions as RedisStore (it is one, on another transport), so processes on
 * either share counts exactly. One request per decision (per turn's batch): EVALSHA of the algorithm's
 * script, healed with EVAL after NOSCRIPT; the default fixed window's INCRBY and PEXPIRE go as one
 * `/multi-exec` transaction. Every key it writes has a TTL.
 */
export class UpstashStore extends RedisStore {
  constructor(options: UpstashStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new TollgateError(
        `Invalid UpstashStore options: expected an object like { client }, got ${options === null ? 'null' : typeof options}`,
        'TG_INVALID_OPTION',
      )
    }
    for (const name of Object.keys(options)) {
      if (!OPTION_KEYS.includes(name)) {
        throw new TollgateError(`Unknown UpstashStore option "${name}"; known options: ${OPTION_KEYS.join(', ')}`, 'TG_UNKNOWN_OPTION')
      }
    }
    const { client, timeout = '500ms', batch } = options
    super({ client: asRedisClient(client), timeout, ...(batch === undefined ? {} : { batch }) })
  }
}
