import { ALGORITHM_NAMES } from '../../algorithms'
import { correctionBatchScript, refundBatchScript } from '../../algorithms/correction-batch'
import { scriptsOf } from '../../algorithms/scripts'
import { describeValue } from '../../errors'
import { hex, sha1 } from '../../hashes'
import type { AlgorithmName } from '../../types'

/*
 * What a refusal of the store's Redis user says, and how to ask Redis about the rest (client-watch.ts
 * learns from them). A refused command inside MULTI or on its own names itself, but a command refused
 * inside a script only says "can't run this command" on Redis 7.0. Then one script asks
 * `redis.acl_check_cmd` about each command the refused script calls, on the refused call's own keys.
 * It is given full, valid argument lists only: Redis 7.0 up to at least Redis and Valkey of late 2024
 * extract the keys of the command checked from the arguments given, without checking its arity, and a
 * bare `acl_check_cmd('EVAL')` reads past them and crashes the server for any user with a key pattern.
 */

/** Every script the store runs: each algorithm's admit, refund and settle. */
export function scripts(): string[] {
  return ALGORITHM_NAMES.flatMap((name) => [
    scriptsOf(name).admit,
    refundBatchScript(scriptsOf(name)),
    correctionBatchScript(scriptsOf(name).settle),
  ])
}

/** The commands a script calls (every `redis.call('X'`, and `try('X'` of the admit scripts, protocol.ts), upper case. */
export function commandsOf(lua: string): string[] {
  return [...new Set([...lua.matchAll(/(?:redis\.p?call|\btry)\('(\w+)'/g)].map((m) => m[1]!.toUpperCase()))]
}

/**
 * The commands each algorithm needs, read from its Lua, plus the script and fast-path commands
 * around it: DEL for `forget`, MULTI/INCRBY/PEXPIRE/EXEC for the fixed window's fast path, MULTI/EXEC
 * for the sorted sets' removals.
 */
export function commandsByAlgorithm(): Map<string, AlgorithmName[]> {
  const users = new Map<string, AlgorithmName[]>()
  const add = (command: string, name: AlgorithmName) => {
    const list = users.get(command) ?? []
    if (!list.includes(name)) list.push(name)
    users.set(command, list)
  }
  for (const name of ALGORITHM_NAMES) {
    const { admit, refund, settle } = scriptsOf(name)
    for (const command of commandsOf(`${admit}${refund}${settle}`)) add(command, name)
    for (const command of ['EVAL', 'EVALSHA', 'DEL']) add(command, name)
  }
  for (const command of ['MULTI', 'INCRBY', 'PEXPIRE', 'EXEC']) add(command, 'fixed-window')
  // The removals by call id (releases, refunds) go in a transaction (removals.ts).
  for (const name of ['sliding-log', 'concurrency'] as const) for (const command of ['MULTI', 'EXEC']) add(command, name)
  return users
}

/** The script (its Lua) that a SHA1 names, for every script the store runs. */
export function scriptsBySha(): Map<string, string> {
  return new Map(scripts().map((lua) => [hex(sha1(lua)), lua]))
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
  HGET: (k) => ['HGET', k, 'n'],
  HMGET: (k) => ['HMGET', k, 'n'],
  HSET: (k) => ['HSET', k, 'n', '0'],
  HINCRBY: (k) => ['HINCRBY', k, 'n', '1'],
  TYPE: (k) => ['TYPE', k],
  ZSCORE: (k) => ['ZSCORE', k, 'm'],
  EXISTS: (k) => ['EXISTS', k],
  PTTL: (k) => ['PTTL', k],
  PEXPIRE: (k) => ['PEXPIRE', k, '1'],
  DEL: (k) => ['DEL', k],
  ZADD: (k) => ['ZADD', k, '1', 'm'],
  ZREM: (k) => ['ZREM', k, 'm'],
  ZCOUNT: (k) => ['ZCOUNT', k, '0', '1'],
  ZRANGE: (k) => ['ZRANGE', k, '0', '-1'],
  ZREMRANGEBYSCORE: (k) => ['ZREMRANGEBYSCORE', k, '0', '1'],
}

/**
 * ARGV is a run of argument lists, each preceded by its length; returns the 1-based positions of the
 * lists the user may not run, or false before Redis 7 (no acl_check_cmd: nothing is asked).
 */
export const DIAGNOSIS = `
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
export const NAMED_REFUSAL = /no permissions to run the '([^']+)' command/i
/** A refusal inside a script that names neither command nor key (Redis 7.0: "can't run this command"; newer: "No permissions to access a key"). */
export const SCRIPT_REFUSAL = /user executing the script can't|ACL failure in script/i
/** A refusal of a key by the user's key pattern, outside a script or of a script's declared keys. */
export const KEY_REFUSAL = /no permissions to access (one of the keys|a key)/i

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : describeValue(error)
}

/** The command and arguments a failed call was (ioredis's `command` on its errors; node-redis.ts sets it too). */
export function commandOf(error: unknown): { name: string; args: string[] } | undefined {
  const command = (error as { command?: { name?: unknown; args?: unknown } } | null)?.command
  if (typeof command?.name !== 'string' || !Array.isArray(command.args)) return undefined
  return { name: command.name.toLowerCase(), args: command.args.map(String) }
}

/** The keys a call names: a script's declared keys, or a key command's first argument. */
export function keysOfCommand(command: { name: string; args: string[] }): string[] {
  if (command.name === 'eval' || command.name === 'evalsha') return command.args.slice(2, 2 + Number(command.args[1]))
  return command.args.length > 0 ? [command.args[0]!] : []
}
