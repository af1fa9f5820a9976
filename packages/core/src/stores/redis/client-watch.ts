import type { FailureCauses } from './deadline'
import { onePer } from './one-per'
import {
  commandOf,
  commandsByAlgorithm,
  commandsOf,
  DIAGNOSIS,
  diagnosisChecks,
  KEY_REFUSAL,
  keysOfCommand,
  messageOf,
  NAMED_REFUSAL,
  SCRIPT_REFUSAL,
  scripts,
  scriptsBySha,
} from './permissions'

/*
 * What a RedisStore learns about its client once it can talk to it, without delaying construction
 * (which stays synchronous and sends nothing to a lazyConnect client that has not connected yet):
 * - its scripts, preloaded with SCRIPT LOAD on every master at each (re)connection, so a fresh
 *   process does not compile them on its first decisions;
 * - `maxmemory-policy`, when CONFIG GET is allowed: an evicting policy with a maxmemory can evict a
 *   counter, which then restarts from zero; warned about once;
 * - the client's last connection error (a TLS certificate the client does not trust, a refused
 *   connection), which a call that times out names instead of only "did not answer";
 * - what its Redis user may not do, learnt from the first refusal, never probed ahead (how a refusal
 *   is read, and how Redis is asked about one that names nothing: permissions.ts).
 * Each of these is a command a least-privilege user may be refused (SCRIPT, CONFIG): a refusal is
 * skipped. One watch per client, however many stores share it. Warnings go to process.emitWarning
 * (a store has no logger; the Node process prints them once, or the app routes them with
 * process.on('warning')).
 */

/** The part of an ioredis client the checks use; every member optional, so fakes without them still work. */
export interface WatchedClient {
  readonly status?: string
  readonly isCluster?: boolean
  /** ioredis: the connection options (`redisOptions` on a Cluster), read for the ACL user's name. */
  readonly options?: {
    readonly host?: string
    readonly port?: number
    readonly username?: unknown
    readonly redisOptions?: { readonly username?: unknown }
  }
  on?(event: string, listener: (...args: never[]) => void): unknown
  listenerCount?(event: string): number
  call?(command: string, ...args: Array<string | number>): Promise<unknown>
  nodes?(role: 'master'): WatchedClient[]
}

/** How long a Cluster node's connection error is still named once the cluster as a whole is ready. */
const NODE_ERROR_MS = 10_000

class ClientWatch implements FailureCauses {
  private lastError: Error | undefined
  private lastErrorAt = 0
  /** Commands the user may not run, upper case, as learnt from refusals. */
  private readonly missing = new Set<string>()
  /** A key the user's key pattern does not cover, as learnt from a refusal. */
  private deniedKey: string | undefined
  /** The diagnosis of a refused script: running, or done since the client was last ready. */
  private diagnosis: Promise<void> | undefined
  private diagnosed = false
  private warnedPermissions = false
  private warnedEviction = false

  constructor(private readonly client: WatchedClient) {
    const on = client.on?.bind(client)
    if (on === undefined) return
    if (client.isCluster === true) {
      // A Cluster reports each node's connection errors as 'node error'. Its own 'error' is left
      // alone: listening to it would change what happens for an app that does not.
      on('node error', (error: Error) => this.remember(error))
    } else {
      on('error', (error: Error) => {
        this.remember(error)
        // ioredis prints an error nobody listens to; with this listener it would not, so print it
        // the same way for an app that has none of its own.
        if (client.listenerCount?.('error') === 1) console.error('[ioredis] Unhandled error event:', error.stack)
      })
    }
    on('ready', () => {
      this.lastError = undefined
      // The ACL may have changed while the client was away: a refused script is diagnosed anew.
      this.diagnosed = false
      this.prepare()
    })
    // A client that is already connected, or connecting (the commands queue ahead of any decision),
    // is prepared now; a lazyConnect client that has not connected ('wait') is sent nothing until ready.
    if (client.status === 'ready' || (client.isCluster !== true && (client.status === 'connecting' || client.status === 'connect'))) {
      this.prepare()
    }
  }

  connectionError(): Error | undefined {
    if (this.lastError === undefined) return undefined
    if (this.client.status !== 'ready' || Date.now() - this.lastErrorAt < NODE_ERROR_MS) return this.lastError
    return undefined
  }

  refusedCommands(cause?: unknown): string | undefined {
    if (cause !== undefined) this.learn(cause)
    if (this.missing.size === 0 && this.deniedKey === undefined) return undefined
    const user = this.user()
    const parts: string[] = []
    if (this.missing.size > 0) {
      const users = commandsByAlgorithm()
      const named = [...this.missing].map((c) => (users.has(c) ? `${c} (used by ${users.get(c)!.join(', ')})` : c))
      const grant = [...this.missing].map((c) => `+${c.toLowerCase()}`).join(' ')
      parts.push(`cannot run ${named.join(', ')}; allow it with ACL SETUSER ${user} ${grant}`)
    }
    if (this.deniedKey !== undefined) parts.push(`cannot access key ${this.deniedKey}; its key pattern must cover the prefix`)
    return `NOPERM: the Redis user "${user}" ${parts.join('; it ')}`
  }

  explain(cause: unknown): Promise<void> | undefined {
    this.learn(cause)
    return this.diagnosis
  }

  /** The ACL user the client logs in as: the one its options name, else Redis's `default`. */
  private user(): string {
    const options = this.client.options
    const name = options?.username ?? options?.redisOptions?.username
    return typeof name === 'string' && name !== '' ? name : 'default'
  }

  /** What a refusal says (a named command, a denied key), or a script refusal that needs a diagnosis. */
  private learn(cause: unknown): void {
    const errors = [cause, ...(((cause as { previousErrors?: unknown } | null)?.previousErrors as unknown[] | undefined) ?? [])]
    for (const error of errors) {
      const message = messageOf(error)
      const named = NAMED_REFUSAL.exec(message)
      const command = commandOf(error)
      if (named !== null) this.found([named[1]!.toUpperCase()], undefined)
      else if (SCRIPT_REFUSAL.test(message) && command !== undefined) this.diagnose(command)
      else if (KEY_REFUSAL.test(message) && command !== undefined) this.found([], keysOfCommand(command)[0])
    }
  }

  private found(commands: string[], key: string | undefined): void {
    for (const command of commands) this.missing.add(command)
    if (key !== undefined) this.deniedKey ??= key
    const sentence = this.refusedCommands()
    if (this.warnedPermissions || sentence === undefined) return
    this.warnedPermissions = true
    process.emitWarning(`Tollgate: ${sentence}. Calls that need it fail, and onStoreError applies to them.`, {
      type: 'TollgateWarning',
      code: 'TG_REDIS_NOPERM',
    })
  }

  /**
   * Asks acl_check_cmd which of the refused script's commands its user may not run on its keys: once
   * per connection, never two at a time (see the top of this file for how it is asked).
   */
  private diagnose(command: { name: string; args: string[] }): void {
    if (this.diagnosed || this.diagnosis !== undefined || typeof this.client.call !== 'function') return
    const keys = keysOfCommand(command)
    const first = command.args[0] ?? ''
    const lua = command.name === 'evalsha' ? scriptsBySha().get(first.toLowerCase()) : first
    const commands = lua === undefined ? [...commandsByAlgorithm().keys()] : commandsOf(lua)
    const checks = diagnosisChecks(commands, keys)
    const run = async (): Promise<void> => {
      let refused: unknown
      try {
        refused = await this.client.call!('EVAL', DIAGNOSIS, 0, ...checks.flatMap((c) => [c.length, ...c]))
      } catch (error) {
        // Refused itself (no EVAL) names what it lacks; anything else (a timeout, a closed connection) says nothing.
        const named = NAMED_REFUSAL.exec(messageOf(error))
        if (named !== null) this.found([named[1]!.toUpperCase()], undefined)
        return
      }
      if (!Array.isArray(refused)) return // Redis < 7: no acl_check_cmd
      const denied = new Set(refused.map((n) => checks[Number(n) - 1]).filter((c) => c !== undefined))
      // A key every command is refused on is outside the user's key pattern; otherwise the commands are missing.
      const keyChecks = (key: string) => checks.filter((c) => c[1] === key)
      const deniedKey = keys.find((key) => keyChecks(key).length > 0 && keyChecks(key).every((c) => denied.has(c)))
      const missing = [...denied].filter((c) => deniedKey === undefined || c[1] !== deniedKey)
      this.found([...new Set(missing.map((c) => c[0]!))], deniedKey)
    }
    this.diagnosis = run().finally(() => {
      this.diagnosis = undefined
      this.diagnosed = true
    })
  }

  private remember(error: Error): void {
    this.lastError = error
    this.lastErrorAt = Date.now()
  }

  /** Preload the scripts, read the eviction policy. Never throws; a command Redis refuses is skipped. */
  private prepare(): void {
    const client = this.client
    if (typeof client.call !== 'function') return
    const masters = client.isCluster === true ? (client.nodes?.('master') ?? []) : [client]
    for (const node of masters) {
      for (const lua of scripts()) node.call?.('SCRIPT', 'LOAD', lua).catch(ignore)
    }
    void this.checkEviction(masters[0] ?? client)
  }

  private async checkEviction(node: WatchedClient): Promise<void> {
    if (this.warnedEviction) return
    let policy: string
    let maxmemory: number
    try {
      policy = String(configValue(await node.call!('CONFIG', 'GET', 'maxmemory-policy'), 'maxmemory-policy'))
      maxmemory = Number(configValue(await node.call!('CONFIG', 'GET', 'maxmemory'), 'maxmemory'))
    } catch {
      return // CONFIG is often refused (managed Redis, ACL): nothing to say then
    }
    // Without a maxmemory, nothing is ever evicted; volatile-* is as bad as allkeys-*: every key
    // Tollgate writes has a TTL.
    if (this.warnedEviction || policy === 'noeviction' || policy === 'undefined' || !(maxmemory > 0)) return
    this.warnedEviction = true
    process.emitWarning(
      `Tollgate: this Redis evicts keys when it reaches maxmemory (maxmemory-policy ${policy}): an evicted counter starts again ` +
        'from zero, so a client at its limit can be admitted again before its window ends. Use maxmemory-policy noeviction ' +
        '(a full Redis then refuses the write, the call fails with OOM and onStoreError applies), or give it memory to spare.',
      { type: 'TollgateWarning', code: 'TG_REDIS_EVICTION' },
    )
  }
}

function ignore(): void {}

/** The one watch of `client`, started on first call; see the comment at the top of this file. */
export const watchClient: (client: WatchedClient) => FailureCauses = /* @__PURE__ */ onePer(
  (client: WatchedClient) => new ClientWatch(client),
)

/**
 * A parameter's value in a CONFIG GET reply, as the client hands it over: a flat [name, value] array
 * (RESP2, ioredis's replies), or a map (RESP3, node-redis 6's default) as an object or a Map.
 */
function configValue(reply: unknown, name: string): unknown {
  if (Array.isArray(reply)) {
    const at = reply.indexOf(name)
    return at === -1 ? undefined : reply[at + 1]
  }
  if (reply instanceof Map) return reply.get(name)
  if (reply !== null && typeof reply === 'object') return (reply as Record<string, unknown>)[name]
  return undefined
}
