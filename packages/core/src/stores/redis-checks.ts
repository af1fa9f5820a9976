import { ALGORITHM_NAMES, ALGORITHMS } from '../algorithms'
import { describeValue } from '../errors'
import type { AlgorithmName } from '../types'
import type { FailureCauses } from './redis-deadline'

/*
 * What a RedisStore learns about its client once it can talk to it (#12), without delaying
 * construction (which stays synchronous and sends nothing to a lazyConnect client that has not
 * connected yet):
 * - its scripts, preloaded with SCRIPT LOAD on every master at each (re)connection, so a fresh
 *   process does not compile them on its first decisions;
 * - the commands its user may not run, found with `redis.acl_check_cmd` inside a tiny script (Redis
 *   ≥ 7; ACL DRYRUN would need admin rights, this needs only EVAL, which the store needs anyway). A
 *   missing one is warned about once, and then named in the error of every refused call, since a
 *   refused script command only says "can't run this command";
 * - `maxmemory-policy`, when CONFIG GET is allowed: an evicting policy with a maxmemory can evict a
 *   counter, which then restarts from zero; warned about once;
 * - the client's last connection error (a TLS certificate the client does not trust, a refused
 *   connection), which a call that times out names instead of only "did not answer".
 * One watch per client, however many stores share it. Warnings go to process.emitWarning (a store has
 * no logger; the Node process prints them once, or the app routes them with process.on('warning')).
 */

/** The part of an ioredis client the checks use; every member optional, so fakes without them still work. */
export interface WatchedClient {
  readonly status?: string
  readonly isCluster?: boolean
  on?(event: string, listener: (...args: never[]) => void): unknown
  listenerCount?(event: string): number
  call?(command: string, ...args: Array<string | number>): Promise<unknown>
  nodes?(role: 'master'): WatchedClient[]
}

/** Every script the store runs: each algorithm's admit and refund. */
function scripts(): string[] {
  return ALGORITHM_NAMES.flatMap((name) => [ALGORITHMS[name].admitScript, ALGORITHMS[name].refundScript])
}

/**
 * The commands each algorithm needs, read from its Lua (every `redis.call('X'`), plus the script and
 * fast-path commands around it: DEL for `forget`, MULTI/INCRBY/PEXPIRE/EXEC for the fixed window's fast path.
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
    for (const m of `${admitScript}${refundScript}`.matchAll(/redis\.call\('(\w+)'/g)) add(m[1]!.toUpperCase(), name)
    for (const command of ['EVAL', 'EVALSHA', 'DEL']) add(command, name)
  }
  for (const command of ['MULTI', 'INCRBY', 'PEXPIRE', 'EXEC']) add(command, 'fixed-window')
  return users
}

/** Returns the commands in ARGV that the user may not run; false before Redis 7 (no acl_check_cmd). */
const PERMISSION_PROBE = `
if not redis.acl_check_cmd then return false end
local missing = {}
for i = 1, #ARGV do
  if not redis.acl_check_cmd(ARGV[i]) then missing[#missing + 1] = ARGV[i] end
end
return missing`

/** How long a Cluster node's connection error is still named once the cluster as a whole is ready. */
const NODE_ERROR_MS = 10_000

class ClientWatch implements FailureCauses {
  private lastError: Error | undefined
  private lastErrorAt = 0
  private refused: string | undefined
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

  refusedCommands(): string | undefined {
    return this.refused
  }

  private remember(error: Error): void {
    this.lastError = error
    this.lastErrorAt = Date.now()
  }

  /** Preload, probe, read the eviction policy. Never throws; a check Redis refuses is skipped. */
  private prepare(): void {
    const client = this.client
    if (typeof client.call !== 'function') return
    const masters = client.isCluster === true ? (client.nodes?.('master') ?? []) : [client]
    for (const node of masters) {
      for (const lua of scripts()) node.call?.('SCRIPT', 'LOAD', lua).catch(ignore)
    }
    void this.checkPermissions(masters[0] ?? client)
    void this.checkEviction(masters[0] ?? client)
  }

  private async checkPermissions(node: WatchedClient): Promise<void> {
    const users = commandsByAlgorithm()
    // Both sent now, so that their replies come ahead of the first decision's (queued after them).
    const probe = node.call!('EVAL', PERMISSION_PROBE, 0, ...users.keys())
    const whoami = node.call!('ACL', 'WHOAMI').then(String, () => 'default') // may be refused; it only names the user
    let missing: unknown
    try {
      missing = await probe
    } catch (error) {
      // Not even EVAL: every script fails. Anything else (a timeout, a closed connection) says nothing.
      if (!/NOPERM|no permissions/i.test(error instanceof Error ? error.message : describeValue(error))) return
      missing = ['EVAL']
    }
    if (!Array.isArray(missing)) return // Redis < 7: no acl_check_cmd
    if (missing.length === 0) {
      this.refused = undefined
      return
    }
    const user = await whoami
    const named = missing.map((c) => `${String(c).toUpperCase()} (used by ${(users.get(String(c).toUpperCase()) ?? []).join(', ')})`)
    const grant = missing.map((c) => `+${String(c).toLowerCase()}`).join(' ')
    this.refused = `NOPERM: the Redis user "${user}" cannot run ${named.join(', ')}; allow it with ACL SETUSER ${user} ${grant}`
    if (!this.warnedPermissions) {
      this.warnedPermissions = true
      process.emitWarning(`Tollgate: ${this.refused}. Calls that need it fail, and onStoreError applies to them.`, {
        type: 'TollgateWarning',
        code: 'TG_REDIS_NOPERM',
      })
    }
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
