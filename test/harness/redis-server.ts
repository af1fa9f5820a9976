import { type ChildProcess, spawn } from 'node:child_process'
import { constants as fsConstants } from 'node:fs'
import { access, mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { Redis } from 'ioredis'
import { sleep } from '../support/time'
import { reapWhenProcessEnds } from './orphan-reaper'

/** Every spawned server binds here only: test servers have no password and must not be reachable from the network. */
export const REDIS_HOST = '127.0.0.1'

export const MISSING_REDIS_SERVER_MESSAGE =
  'redis-server is not on PATH: install it (apt-get install redis-server) or set REDIS_URL to an existing server ' +
  '(e.g. REDIS_URL=redis://127.0.0.1:6379 npx jest). Fault and cluster tests start their own servers and need redis-server either way.'

export interface StartRedisServerOptions {
  /**
   * The server binary: a path, or a name looked up on PATH (a redis-server-compatible one, e.g. a
   * `valkey-server`; see servers.ts for the test matrix).
   * @default "redis-server"
   */
  bin?: string
  /**
   * Port to listen on. If it is briefly busy the start is retried for up to 2 s.
   * @default a free port picked by the OS (a fresh one is picked if another process grabs it first)
   */
  port?: number
  /**
   * Extra redis-server arguments, computed from the port actually chosen and the server's own temp
   * dir (cluster nodes keep their nodes-PORT.conf there). Called once per start attempt; `restart()`
   * reuses the arguments of the attempt that succeeded, so a cluster node comes back with the same
   * identity and bus port.
   */
  extraArgs?: (port: number, dir: string) => readonly string[] | Promise<readonly string[]>
  /**
   * How long to wait for the first PONG, in ms.
   * @default 5000
   */
  readyTimeoutMs?: number
}

/** A redis-server process this harness spawned. Signals only ever go to that process. */
export interface RedisServer {
  readonly host: string
  readonly port: number
  /** `redis://127.0.0.1:PORT` */
  readonly url: string
  /** PID of the current process; changes after `restart()`. */
  readonly pid: number
  /** True while the current process has not exited (a frozen server is still running). */
  readonly running: boolean
  /** The server's own temp dir (`--dir`), removed by `stop()`. */
  readonly dir: string
  /** SIGTERM, wait for exit, SIGKILL after 2 s; then removes the temp dir. Final and idempotent. */
  stop(): Promise<void>
  /** Sends a signal that ends the process and waits for the exit. Use `restart()` to bring it back. */
  kill(signal?: NodeJS.Signals): Promise<void>
  /** SIGSTOP: the port still accepts TCP connections, but no command is answered until `thaw()`. */
  freeze(): void
  /** SIGCONT */
  thaw(): void
  /**
   * Starts a new process on the same port (stopping the current one first if it still runs) and
   * waits until it answers PING. Without persistence the new process starts empty.
   */
  restart(): Promise<void>
}

const DEFAULT_READY_TIMEOUT_MS = 5000
const STOP_GRACE_MS = 2000
const KILL_WAIT_MS = 5000
// How long a start on a fixed port (restart, or options.port) keeps retrying EADDRINUSE, e.g. while
// a just-killed process's socket is still being torn down.
const SAME_PORT_RETRY_MS = 2000
const FREE_PORT_ATTEMPTS = 5
const LOG_TAIL_LINES = 40

interface ExitInfo {
  code: number | null
  signal: NodeJS.Signals | null
  error?: Error
}

interface Spawned {
  child: ChildProcess
  pid: number
  log: LogTail
  exited: Promise<ExitInfo>
  exit: ExitInfo | undefined
}

/** The last lines redis-server printed, so a failed start can say why (bad flag, port in use...). */
class LogTail {
  private readonly lines: string[] = []
  private partial = ''

  push(chunk: Buffer): void {
    const parts = (this.partial + chunk.toString('utf8')).split('\n')
    this.partial = parts.pop() ?? ''
    for (const line of parts) this.add(line)
  }

  text(): string {
    const all = this.partial === '' ? this.lines : [...this.lines, this.partial]
    return all.length === 0 ? '(no output)' : all.join('\n')
  }

  private add(line: string): void {
    this.lines.push(line)
    if (this.lines.length > LOG_TAIL_LINES) this.lines.shift()
  }
}

// --- helpers shared with redis-cluster.ts ---------------------------------------------------------

/** Resolves a binary on PATH, or throws `missingMessage` so a missing install is never a silent skip. */
export async function requireBinary(name: string, missingMessage: string): Promise<string> {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue
    const candidate = join(dir, name)
    try {
      await access(candidate, fsConstants.X_OK)
      return candidate
    } catch {
      // not in this PATH entry
    }
  }
  throw new Error(missingMessage)
}

/**
 * A port nothing listens on right now: the OS picks one for a throwaway listener, which is then
 * closed. Another process can take it before redis-server binds, so callers retry on EADDRINUSE.
 */
export function getFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.on('error', reject)
    server.listen(0, REDIS_HOST, () => {
      const address = server.address()
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port)
        else reject(new Error(`could not read the port of a probe listener (got ${String(address)})`))
      })
    })
  })
}

/**
 * Runs `fn` on a one-shot connection that never reconnects, queues or retries, so a probe fails
 * within `timeoutMs` instead of hiding an unready server behind ioredis' retry logic.
 */
export async function withProbeClient<T>(port: number, timeoutMs: number, fn: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({
    host: REDIS_HOST,
    port,
    lazyConnect: true,
    enableOfflineQueue: false,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
  })
  // Refused connections are the expected answer while a server boots; the promise carries them.
  client.on('error', () => {})
  try {
    await client.connect()
    return await fn(client)
  } finally {
    // A probe that found no server has already ended (status "end", socket closed). disconnect()
    // would still arm ioredis' 2 s timer to destroy that closed socket, a timer that can only run out:
    // every refused probe of a booting server left one, and the last few kept jest from exiting.
    if (client.status !== 'end') client.disconnect()
  }
}

// --- spawning -----------------------------------------------------------------------------------

function baseArgs(port: number, dir: string): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    REDIS_HOST,
    // No persistence: a test server must never write an RDB/AOF, and restart() must come back empty.
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'no',
    '--dir',
    dir,
    // Without "now", SIGTERM on a master waits up to 10 s for lagging replicas.
    '--shutdown-on-sigterm',
    'nosave now',
    // A master waits 5 s by default before a full sync, hoping more replicas join; that made a
    // cluster with replicas take 7 s to become ready instead of 2.
    '--repl-diskless-sync-delay',
    '0',
  ]
}

function spawnServer(bin: string, args: readonly string[], dir: string): Spawned {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  const log = new LogTail()
  child.stdout?.on('data', (chunk: Buffer) => log.push(chunk))
  child.stderr?.on('data', (chunk: Buffer) => log.push(chunk))
  const spawned: Spawned = {
    child,
    pid: child.pid ?? -1,
    log,
    exit: undefined,
    exited: new Promise<ExitInfo>((resolve) => {
      child.once('error', (error) => {
        // 'exit' may never follow a spawn error (e.g. EACCES), so settle here too.
        if (spawned.exit === undefined) spawned.exit = { code: null, signal: null, error }
        resolve(spawned.exit)
      })
      child.once('exit', (code, signal) => {
        spawned.exit = { code, signal }
        resolve(spawned.exit)
      })
    }),
  }
  // A forgotten server must not keep the test process alive; the reaper kills it when the process ends.
  child.unref()
  ;(child.stdout as unknown as { unref?: () => void } | null)?.unref?.()
  ;(child.stderr as unknown as { unref?: () => void } | null)?.unref?.()
  reapWhenProcessEnds(child, spawned.exited, dir)
  return spawned
}

/** True once the process has exited, false if it still runs after `timeoutMs` (default: wait as long as it takes). */
function waitForExit(spawned: Spawned, timeoutMs?: number): Promise<boolean> {
  if (spawned.exit !== undefined) return Promise.resolve(true)
  // The child is unref'd so a forgotten server cannot keep Node alive; while we await its exit it must
  // count again, or a plain Node script would simply end here with the promise never settled.
  spawned.child.ref()
  return new Promise((resolve) => {
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => resolve(false), timeoutMs)
    void spawned.exited.then(() => {
      clearTimeout(timer)
      resolve(true)
    })
  })
}

function describeExit(exit: ExitInfo): string {
  if (exit.error !== undefined) return `failed to spawn: ${exit.error.message}`
  return exit.signal !== null ? `exited on ${exit.signal}` : `exited with code ${String(exit.code)}`
}

type LaunchResult = { ok: true; spawned: Spawned } | { ok: false; addressInUse: boolean; error: Error }

/** Spawns one process and waits for PONG; a process that fails to come up is always reaped. */
async function launch(bin: string, args: readonly string[], dir: string, port: number, readyTimeoutMs: number): Promise<LaunchResult> {
  const spawned = spawnServer(bin, args, dir)
  const deadline = Date.now() + readyTimeoutMs
  let lastError = 'no attempt yet'
  while (Date.now() < deadline) {
    if (spawned.exit !== undefined) {
      const log = spawned.log.text()
      return {
        ok: false,
        addressInUse: log.includes('Address already in use'),
        error: new Error(`redis-server on ${REDIS_HOST}:${port} ${describeExit(spawned.exit)} before answering PING. Last output:\n${log}`),
      }
    }
    try {
      const answeringPid = await withProbeClient(port, Math.min(500, Math.max(50, deadline - Date.now())), async (c) => {
        const reply = await c.ping()
        if (reply !== 'PONG') throw new Error(`unexpected reply ${JSON.stringify(reply)}`)
        return /^process_id:(\d+)/m.exec(await c.info('server'))?.[1]
      })
      if (answeringPid === String(spawned.pid)) return { ok: true, spawned }
      // Another Redis (say, a parallel jest worker's) won the race for the port our probe listener
      // freed, and a bare PONG would have passed for ours. Ours will fail to bind; try another port.
      spawned.child.kill('SIGKILL')
      await waitForExit(spawned)
      return {
        ok: false,
        addressInUse: true,
        error: new Error(`${REDIS_HOST}:${port} is already served by another redis-server (pid ${String(answeringPid)})`),
      }
    } catch (error) {
      lastError = (error as Error).message
    }
    await sleep(25)
  }
  spawned.child.kill('SIGKILL')
  await waitForExit(spawned)
  return {
    ok: false,
    addressInUse: false,
    error: new Error(
      `redis-server (pid ${spawned.pid}) on ${REDIS_HOST}:${port} did not answer PING within ${readyTimeoutMs} ms ` +
        `(last error: ${lastError}). Last output:\n${spawned.log.text()}`,
    ),
  }
}

/** Starts on exactly `port`, retrying EADDRINUSE for a short while. */
async function launchOnPort(bin: string, args: readonly string[], dir: string, port: number, readyTimeoutMs: number): Promise<Spawned> {
  const retryUntil = Date.now() + SAME_PORT_RETRY_MS
  for (;;) {
    const result = await launch(bin, args, dir, port, readyTimeoutMs)
    if (result.ok) return result.spawned
    if (!result.addressInUse || Date.now() >= retryUntil) throw result.error
    await sleep(100)
  }
}

class SpawnedRedisServer implements RedisServer {
  readonly host = REDIS_HOST
  readonly url: string
  private frozen = false
  private stopped = false

  constructor(
    readonly port: number,
    readonly dir: string,
    private readonly bin: string,
    private readonly args: readonly string[],
    private readonly readyTimeoutMs: number,
    private current: Spawned,
  ) {
    this.url = `redis://${REDIS_HOST}:${port}`
  }

  get pid(): number {
    return this.current.pid
  }

  get running(): boolean {
    return this.current.exit === undefined
  }

  async stop(): Promise<void> {
    if (this.stopped) return
    this.stopped = true
    await this.terminate()
    await rm(this.dir, { recursive: true, force: true })
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    this.assertNotStopped('kill')
    const current = this.current
    if (current.exit !== undefined) return
    current.child.kill(signal)
    // A stopped process only acts on SIGKILL; anything else stays pending until it runs again.
    if (this.frozen && signal !== 'SIGKILL') current.child.kill('SIGCONT')
    this.frozen = false
    if (!(await waitForExit(current, KILL_WAIT_MS))) {
      throw new Error(
        `redis-server (pid ${current.pid}, port ${this.port}) still runs ${KILL_WAIT_MS} ms after ${signal}: ` +
          'kill() is for signals that end the process; use freeze()/thaw() to pause it',
      )
    }
  }

  freeze(): void {
    this.assertRunning('freeze')
    this.current.child.kill('SIGSTOP')
    this.frozen = true
  }

  thaw(): void {
    this.assertRunning('thaw')
    this.current.child.kill('SIGCONT')
    this.frozen = false
  }

  async restart(): Promise<void> {
    this.assertNotStopped('restart')
    await this.terminate()
    this.current = await launchOnPort(this.bin, this.args, this.dir, this.port, this.readyTimeoutMs)
  }

  private async terminate(): Promise<void> {
    const current = this.current
    if (current.exit !== undefined) return
    if (this.frozen) current.child.kill('SIGCONT')
    this.frozen = false
    current.child.kill('SIGTERM')
    if (await waitForExit(current, STOP_GRACE_MS)) return
    current.child.kill('SIGKILL')
    await waitForExit(current)
  }

  private assertNotStopped(action: string): void {
    if (this.stopped) throw new Error(`cannot ${action}() redis-server on port ${this.port}: stop() was already called`)
  }

  private assertRunning(action: string): void {
    this.assertNotStopped(action)
    if (this.current.exit !== undefined) {
      throw new Error(`cannot ${action}() redis-server on port ${this.port}: its process ${describeExit(this.current.exit)}`)
    }
  }
}

function validateOptions(options: StartRedisServerOptions): void {
  const { port, readyTimeoutMs } = options
  if (port !== undefined && !(Number.isInteger(port) && port > 0 && port <= 65535)) {
    throw new Error(`Invalid option "port": expected an integer from 1 to 65535, got ${String(port)} (${typeof port})`)
  }
  if (readyTimeoutMs !== undefined && !(Number.isFinite(readyTimeoutMs) && readyTimeoutMs > 0)) {
    throw new Error(
      `Invalid option "readyTimeoutMs": expected a positive number of ms, got ${String(readyTimeoutMs)} (${typeof readyTimeoutMs})`,
    )
  }
}

/**
 * Spawns redis-server on 127.0.0.1 with no persistence and its own temp dir, and resolves once it
 * answers PING. The caller must `stop()` it; leftovers are SIGKILLed when the process ends.
 */
export async function startRedisServer(options: StartRedisServerOptions = {}): Promise<RedisServer> {
  validateOptions(options)
  const bin = options.bin?.includes('/')
    ? options.bin
    : await requireBinary(
        options.bin ?? 'redis-server',
        options.bin === undefined ? MISSING_REDIS_SERVER_MESSAGE : `${options.bin} is not on PATH`,
      )
  const readyTimeoutMs = options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS
  const dir = await mkdtemp(join(tmpdir(), 'tollgate-redis-'))
  try {
    for (let attempt = 1; ; attempt++) {
      const port = options.port ?? (await getFreePort())
      const args = [...baseArgs(port, dir), ...((await options.extraArgs?.(port, dir)) ?? [])]
      if (options.port !== undefined) {
        const spawned = await launchOnPort(bin, args, dir, port, readyTimeoutMs)
        return new SpawnedRedisServer(port, dir, bin, args, readyTimeoutMs, spawned)
      }
      const result = await launch(bin, args, dir, port, readyTimeoutMs)
      if (result.ok) return new SpawnedRedisServer(port, dir, bin, args, readyTimeoutMs, result.spawned)
      // Someone took the port between our probe and redis-server's bind: pick another.
      if (!result.addressInUse || attempt >= FREE_PORT_ATTEMPTS) throw result.error
    }
  } catch (error) {
    await rm(dir, { recursive: true, force: true })
    throw error
  }
}
