import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { sleep } from '../support/time'
import { getFreePort, REDIS_HOST, type RedisServer, requireBinary, startRedisServer, withProbeClient } from './redis-server'

const execFileAsync = promisify(execFile)

export interface StartRedisClusterOptions {
  /**
   * Number of masters; redis-cli refuses to create a cluster with fewer than 3.
   * @default 3
   */
  masters?: number
  /**
   * Replicas attached to each master.
   * @default 0
   */
  replicasPerMaster?: number
  /**
   * How long to wait, after `redis-cli --cluster create`, for every node to agree the cluster is ok, in ms.
   * @default 15000
   */
  readyTimeoutMs?: number
}

export interface RedisClusterNode {
  host: string
  port: number
  /** PID of the node's current process (changes if its server is restarted). */
  pid: number
  /** Role once the cluster formed; a failover can change it later. */
  role: 'master' | 'replica'
}

export interface RedisCluster {
  /** Every node, in the order of `servers`. */
  readonly nodes: RedisClusterNode[]
  /** Seeds for `new Cluster(startupNodes)`: every node, so any single one may be down. */
  readonly startupNodes: Array<{ host: string; port: number }>
  /** The node processes, so a test can kill, freeze or restart one (it rejoins with the same identity). */
  readonly servers: RedisServer[]
  /** Stops every node (each removes its temp dir, which holds its nodes-PORT.conf). Idempotent. */
  stop(): Promise<void>
}

const MISSING_REDIS_CLI_MESSAGE =
  'redis-cli is not on PATH: cluster tests create their cluster with `redis-cli --cluster create`; install it (apt-get install redis-server, which ships redis-cli)'
const CLUSTER_SLOTS = 16384
const CLI_TIMEOUT_MS = 30000

function validateIntAtLeast(name: string, value: number, min: number): void {
  if (!(Number.isInteger(value) && value >= min)) {
    throw new Error(`Invalid option "${name}": expected an integer >= ${min}, got ${String(value)} (${typeof value})`)
  }
}

function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>()
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':')
    if (i > 0) fields.set(line.slice(0, i), line.slice(i + 1))
  }
  return fields
}

interface NodeState {
  port: number
  cluster: Map<string, string>
  replication: Map<string, string>
}

async function readNodeState(port: number): Promise<NodeState> {
  return withProbeClient(port, 1000, async (client) => ({
    port,
    cluster: parseInfo(String(await client.call('CLUSTER', 'INFO'))),
    replication: parseInfo(await client.info('replication')),
  }))
}

/** Why the cluster is not ready yet, or undefined once every node agrees it is. */
function notReadyReason(states: NodeState[], masters: number, replicasPerMaster: number): string | undefined {
  for (const s of states) {
    const c = s.cluster
    const where = `${REDIS_HOST}:${s.port}`
    if (c.get('cluster_state') !== 'ok') return `${where} reports cluster_state:${c.get('cluster_state') ?? '?'}`
    if (c.get('cluster_slots_assigned') !== String(CLUSTER_SLOTS)) {
      return `${where} sees ${c.get('cluster_slots_assigned') ?? '?'} of ${CLUSTER_SLOTS} slots assigned`
    }
    // Without this a node may be "ok" before it has met every peer, and a client seeded from it
    // would get a partial slot map.
    if (c.get('cluster_known_nodes') !== String(states.length)) {
      return `${where} knows ${c.get('cluster_known_nodes') ?? '?'} of ${states.length} nodes`
    }
    if (c.get('cluster_size') !== String(masters)) return `${where} counts ${c.get('cluster_size') ?? '?'} of ${masters} masters`
    const role = s.replication.get('role')
    if (role === 'slave' && s.replication.get('master_link_status') !== 'up') {
      return `${where} (replica) has master_link_status:${s.replication.get('master_link_status') ?? '?'}`
    }
    // Failover tests need every replica to be in sync before a master is killed.
    if (role === 'master' && Number(s.replication.get('connected_slaves') ?? '0') < replicasPerMaster) {
      return `${where} (master) has ${s.replication.get('connected_slaves') ?? '?'} of ${replicasPerMaster} replicas connected`
    }
  }
  return undefined
}

async function waitUntilReady(servers: RedisServer[], masters: number, replicasPerMaster: number, timeoutMs: number): Promise<NodeState[]> {
  const deadline = Date.now() + timeoutMs
  let reason = 'no check yet'
  while (Date.now() < deadline) {
    try {
      const states = await Promise.all(servers.map((s) => readNodeState(s.port)))
      const why = notReadyReason(states, masters, replicasPerMaster)
      if (why === undefined) return states
      reason = why
    } catch (error) {
      reason = (error as Error).message
    }
    await sleep(100)
  }
  throw new Error(`Redis Cluster on ports ${servers.map((s) => s.port).join(', ')} was not ready within ${timeoutMs} ms: ${reason}`)
}

async function createCluster(cli: string, servers: RedisServer[], replicasPerMaster: number): Promise<void> {
  const args = [
    '--cluster',
    'create',
    ...servers.map((s) => `${REDIS_HOST}:${s.port}`),
    '--cluster-replicas',
    String(replicasPerMaster),
    '--cluster-yes',
  ]
  try {
    await execFileAsync(cli, args, { timeout: CLI_TIMEOUT_MS, killSignal: 'SIGKILL' })
  } catch (error) {
    const e = error as Error & { stdout?: string; stderr?: string }
    const output = `${e.stdout ?? ''}${e.stderr ?? ''}`.trim().split('\n').slice(-20).join('\n')
    throw new Error(`redis-cli ${args.join(' ')} failed: ${e.message}\n${output}`)
  }
}

/**
 * Spawns masters * (1 + replicasPerMaster) cluster-enabled redis-servers on 127.0.0.1, joins them
 * with `redis-cli --cluster create`, and resolves once every node reports all slots ok.
 */
export async function startRedisCluster(options: StartRedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3
  const replicasPerMaster = options.replicasPerMaster ?? 0
  const readyTimeoutMs = options.readyTimeoutMs ?? 15000
  validateIntAtLeast('masters', masters, 3)
  validateIntAtLeast('replicasPerMaster', replicasPerMaster, 0)
  validateIntAtLeast('readyTimeoutMs', readyTimeoutMs, 1)
  const cli = await requireBinary('redis-cli', MISSING_REDIS_CLI_MESSAGE)

  const servers: RedisServer[] = []
  try {
    const total = masters * (1 + replicasPerMaster)
    const results = await Promise.allSettled(
      Array.from({ length: total }, () =>
        startRedisServer({
          // The node's own temp dir holds its nodes-PORT.conf, so stop() and the orphan reaper clean
          // it up with the server, and restart() finds it again.
          extraArgs: async (port, dir) => {
            // The bus port defaults to port + 10000, which is past 65535 for most OS-picked ports
            // (the ephemeral range reaches 60999), so each node gets its own free bus port.
            let busPort = await getFreePort()
            while (busPort === port) busPort = await getFreePort()
            return [
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              join(dir, `nodes-${port}.conf`),
              '--cluster-node-timeout',
              '2000',
              '--cluster-port',
              String(busPort),
            ]
          },
        }),
      ),
    )
    for (const r of results) if (r.status === 'fulfilled') servers.push(r.value)
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (failed !== undefined) throw failed.reason

    await createCluster(cli, servers, replicasPerMaster)
    const states = await waitUntilReady(servers, masters, replicasPerMaster, readyTimeoutMs)
    const roles = states.map((s): RedisClusterNode['role'] => (s.replication.get('role') === 'slave' ? 'replica' : 'master'))

    let stopped: Promise<void> | undefined
    return {
      get nodes() {
        return servers.map((s, i) => ({ host: s.host, port: s.port, pid: s.pid, role: roles[i] ?? 'master' }))
      },
      startupNodes: servers.map((s) => ({ host: s.host, port: s.port })),
      servers,
      stop() {
        stopped ??= Promise.all(servers.map((s) => s.stop())).then(() => undefined)
        return stopped
      },
    }
  } catch (error) {
    await Promise.all(servers.map((s) => s.stop()))
    throw error
  }
}
