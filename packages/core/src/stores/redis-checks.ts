import { createHash } from 'node:crypto'
import { ALGORITHM_NAMES, ALGORITHMS } from '../algorithms'
import { describeValue } from '../errors'
import type { AlgorithmName } from '../types'
import type { FailureCauses } from './redis-deadline'

/*
 * What a RedisStore learns about its client once it can talk to it, without delaying construction
 * (which stays synchronous and sends nothing to a lazyConnect client that has not connected yet):
 * - its scripts, preloaded with SCRIPT LOAD on every master at each (re)connection, so a fresh
 *   process does not compile them on its first decisions;
 * - `maxmemory-policy`, when CONFIG GET is allowed: an evicting policy with a maxmemory can evict a
 *   counter, which then restarts from zero; warned about once;
 * - the client's last connection error (a TLS certificate the client does not trust, a refused
 *   connection), which a call that times out names instead of only "did not answer";
 * - what its Redis user may not do, learnt from the first refusal, never probed ahead: a refused
 *   command inside MULTI or on its own names itself, but a command refused inside a script only says
 *   "can't run this command". Then one script asks `redis.acl_check_cmd` about each command the
 *   refused script calls, on the refused call's own keys. It is given full, valid argument lists
 *   only: Redis 7.0 up to at least Redis and Valkey of late 2024 extract the keys of the command
 *   checked from the arguments given, without checking its arity, and a bare
 *   `acl_check_cmd('EVAL')` reads past them and crashes the server for any user with a key pattern.
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

/** Every script the store runs: each algorithm's admit and refund. */
function scripts(): string[] {
  return ALGORITHM_NAMES.flatMap((name) => [ALGORITHMS[name].admitScript, ALGORITHMS[name].refundScript])
}

/** The commands a script calls (every `redis.call('X'`), upper case. */
export function commandsOf(lua: string): string[] {
  return [...new Set([...lua.matchAll(/redis\.call\('(\w+)'/g)].map((m) => m[1]!.toUpperCase()))]
}

/**
 * The commands each algorithm needs, read from its Lua, plus the script and fast-path commands
 * around it: DEL for `forget`, MULTI/INCRBY/PEXPIRE/EXEC for the fixed window's fast path.
 */
function commandsByAlgorithm(): Map<string, AlgorithmName[]> {
  const users = new Map<string, AlgorithmName[]>()
  const add = (command: string, name: AlgorithmName) => {
    const list = users.get(command) ?? []
    if (!list.includes(name)) list.push(name)
    users.set(command, list)
  }
  for (const name of ALGORITHM_NAMES) {
    const { admitScript, refundScript } = ALGORITHMS[name]
    for (const command of commandsOf(`${admitScript}${refundScript}`)) add(command, name)
    for (const command of ['EVAL', 'EVALSHA', 'DEL']) add(command, name)
  }
  for (const command of ['MULTI', 'INCRBY', 'PEXPIRE', 'EXEC']) add(command, 'fixed-window')
  return users
}

/** The script (its Lua) that a SHA1 names, for every script the store runs. */
function scriptsBySha(): Map<string, string> {
  return new Map(scripts().map((lua) => [createHash('sha1').update(lua).digest('hex'), lua]))
}

/**
 * How `redis.acl_check_cmd` is asked about each command: a whole, valid argument list (see the top of
 * this file for why nothing shorter may be sent). A key command gets a key of the refused call, which
 * checks the user's key pattern as well. A command with no entry here is never asked about.
 */
export const CHECK_FORMS: Readonly<Record<string, (key: string) => readonly string[]>> = {
  GET: (k) => ['GET', k],
  SET: (k) => ['SET', k, '0', 'PX', '1', 'NX'],
  INCRBY: (k) => ['INCRBY', k, '1'],
  DECRBY: (k) => ['DECRBY', k, '1'],
  INCR: (k) => ['INCR', k],
  EXISTS: (k) => ['EXISTS', k],
  PTTL: (k) => ['PTTL', k],
  PEXPIRE: (k) => ['PEXPIRE', k, '1'],
  DEL: (k) => ['DEL', k],
  ZADD: (k) => ['ZADD', k, '1', 'm'],
  ZREM: (k) => ['ZREM', k, 'm'],
  ZCARD: (k) => ['ZCARD', k],
  ZRANGE: (k) => ['ZRANGE', k, '0', '-1'],
  ZREMRANGEBYSCORE: (k) => ['ZREMRANGEBYSCORE', k, '0', '1'],
}

/**
 * ARGV is a run of argument lists, each preceded by its length; returns the 1-based positions of the
 * lists the user may not run, or false before Redis 7 (no acl_check_cmd: nothing is asked).
 */
const DIAGNOSIS = `
if not redis.acl_check_cmd then return false end
local refused = {}
local i, n = 1, 0
while i <= #ARGV do
  n = n + 1
  local count = tonumber(ARGV[i])
  if not redis.acl_check_cmd(unpack(ARGV, i + 1, i + count)) then refused[#refused + 1] = n end
  i = i + count + 1
end
return refused`

/**
 * What to ask acl_check_cmd about a refused script on `keys`: each of its commands on each key. Not
 * EVAL, EVALSHA, MULTI or EXEC: the script ran, so its user may run it, and Redis names a refused
 * MULTI, EXEC or script call itself.
 */
export function diagnosisChecks(commands: readonly string[], keys: readonly string[]): Array<readonly string[]> {
  const checks: Array<readonly string[]> = []
  for (const key of keys) for (const command of commands) if (CHECK_FORMS[command] !== undefined) checks.push(CHECK_FORMS[command](key))
  return checks
}

/**
 * A refusal that names the refused command: "no permissions to run the 'zadd' command", as Redis
 * replies to MULTI or a plain command, and newer Redis and Valkey inside a script too.
 */
const NAMED_REFUSAL = /no permissions to run the '([^']+)' command/i
/** A refusal inside a script that names neither command nor key (Redis 7.0: "can't run this command"; newer: "No permissions to access a key"). */
const SCRIPT_REFUSAL = /user executing the script can't|ACL failure in script/i
/** A refusal of a key by the user's key pattern, outside a script or of a script's declared keys. */
const KEY_REFUSAL = /no permissions to access (one of the keys|a key)/i

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : describeValue(error)
}

/** The command and arguments a failed call was (ioredis's `command` on its errors; redis-node.ts sets it too). */
function commandOf(error: unknown): { name: string; args: string[] } | undefined {
  const command = (error as { command?: { name?: unknown; args?: unknown } } | null)?.command
  if (typeof command?.name !== 'string' || !Array.isArray(command.args)) return undefined
  return { name: command.name.toLowerCase(), args: command.args.map(String) }
}

/** The keys a call names: a script's declared keys, or a key command's first argument. */
function keysOfCommand(command: { name: string; args: string[] }): string[] {
  if (command.name === 'eval' || command.name === 'evalsha') return command.args.slice(2, 2 + Number(command.args[1]))
  return command.args.length > 0 ? [command.args[0]!] : []
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
      policy = String(((await node.call!('CONFIG', 'GET', 'maxmemory-policy')) as unknown[])[1])
      maxmemory = Number(((await node.call!('CONFIG', 'GET', 'maxmemory')) as unknown[])[1])
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

const watches = new WeakMap<object, ClientWatch>()

/** The one watch of `client`, started on first call; see the comment at the top of this file. */
export function watchClient(client: WatchedClient): FailureCauses {
  let watch = watches.get(client)
  if (watch === undefined) {
    watch = new ClientWatch(client)
    watches.set(client, watch)
  }
  return watch
}
