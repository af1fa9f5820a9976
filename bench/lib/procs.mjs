// Child processes of a benchmark run: every process we start is tracked by PID and stopped by PID
// on normal exit, on an error, and on Ctrl-C/SIGTERM/SIGHUP. Nothing else is ever signalled.
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'

const children = new Map() // pid -> { name, child }
const cleanups = []
let shuttingDown = false

export function which(cmd) {
  try {
    return execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim() || null
  } catch {
    return null
  }
}

export const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  } catch {
    return 100
  }
})()

const hasTaskset = !!which('taskset')
export const canPin = hasTaskset && (await import('node:os')).availableParallelism() >= 2

/** Command line pinned to one CPU core when possible (taskset execs, so the PID stays the same). */
export function pinned(core, cmd, args) {
  return canPin ? ['taskset', ['-c', String(core), cmd, ...args]] : [cmd, args]
}

export function track(child, name) {
  children.set(child.pid, { name, child })
  child.once('exit', () => children.delete(child.pid))
  return child
}

export function spawnTracked(name, cmd, args, opts = {}) {
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], ...opts })
  if (child.pid === undefined) throw new Error(`could not start ${name} (${cmd})`)
  return track(child, name)
}

export function onCleanup(fn) {
  cleanups.push(fn)
}

function alive(child) {
  return child.exitCode === null && child.signalCode === null
}

/** SIGTERM one child by PID, SIGKILL it if it has not exited after `ms`. */
export async function stopChild(child, ms = 3000) {
  if (!alive(child)) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  try {
    process.kill(child.pid, 'SIGTERM')
  } catch {}
  const timer = new Promise((resolve) => setTimeout(resolve, ms, 'timeout'))
  if ((await Promise.race([exited, timer])) === 'timeout' && alive(child)) {
    try {
      process.kill(child.pid, 'SIGKILL')
    } catch {}
    await Promise.race([exited, new Promise((r) => setTimeout(r, 1000))])
  }
}

export async function stopAll() {
  for (const fn of cleanups.splice(0)) {
    try {
      await fn()
    } catch {}
  }
  await Promise.all([...children.values()].map(({ child }) => stopChild(child)))
}

/** Stop everything we started, then exit with `code`. Safe to call more than once. */
export async function shutdown(code, message) {
  if (shuttingDown) return
  shuttingDown = true
  if (message) process.stderr.write(`\n${message}\n`)
  await stopAll()
  process.exit(code)
}

export function installSignalHandlers() {
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => shutdown(130, `${sig}: stopping the servers and redis-server this run started...`))
  }
  process.on('uncaughtException', (err) => shutdown(1, `error: ${err.stack ?? err}`))
  process.on('unhandledRejection', (err) => shutdown(1, `error: ${err?.stack ?? err}`))
  // Last resort, synchronous: whatever is still running gets SIGKILL by PID.
  process.on('exit', () => {
    for (const [pid, { child }] of children) {
      if (alive(child)) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {}
      }
    }
  })
}

/** A hard deadline for the whole run. */
export function deadline(minutes, what) {
  const t = setTimeout(
    () => shutdown(1, `${what} exceeded its time limit of ${minutes} min; stopped (raise it with --max-minutes)`),
    minutes * 60_000,
  )
  t.unref()
  return t
}

const handedOut = new Set()

/** A port free on 127.0.0.1 now, never 6379, and never one this process handed out before. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.unref()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => {
        if (port === 6379 || handedOut.has(port)) return freePort().then(resolve, reject)
        handedOut.add(port)
        resolve(port)
      })
    })
  })
}

/** CPU time of a process (all its threads) in microseconds from /proc/<pid>/stat: utime+stime, and stime alone. */
export function cpuTimes(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  // fields[0] is field 3 (state); utime is field 14, stime field 15.
  const kernel = (Number(fields[12]) * 1e6) / CLK_TCK
  return { total: (Number(fields[11]) * 1e6) / CLK_TCK + kernel, kernel }
}

/** utime+stime of a process (all its threads), in microseconds. */
export const cpuMicros = (pid) => cpuTimes(pid).total

/**
 * The same CPU time (user and kernel, all threads) in microseconds at nanosecond resolution, from the
 * scheduler's own account (/proc/<pid>/task/<tid>/schedstat, its first field: ns on a CPU), where /proc/stat
 * counts whole clock ticks (10 ms): a run of a tenth of a second of CPU is then measured to a few percent,
 * not to a tenth. Falls back to the ticks where the kernel keeps no schedstat.
 */
export function cpuMicrosFine(pid) {
  let tids = []
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {}
  let ns = 0
  for (const tid of tids) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0])
    } catch {} // a thread that ended meanwhile
  }
  return Number.isFinite(ns) && ns > 0 ? ns / 1000 : cpuMicros(pid)
}

/**
 * Inter-processor interrupts received so far by core `core` (/proc/interrupts: function-call and
 * rescheduling IPIs, the ones a wake-up of a task sleeping on that core sends), or null where the
 * file or the core's column is missing.
 */
export function ipisTo(core) {
  let text
  try {
    text = readFileSync('/proc/interrupts', 'utf8')
  } catch {
    return null
  }
  let n = 0
  let found = false
  for (const line of text.split('\n')) {
    const cols = line.trim().split(/\s+/)
    if (cols[0] === 'CAL:' || cols[0] === 'RES:') {
      const v = Number(cols[1 + core])
      if (Number.isFinite(v)) {
        n += v
        found = true
      }
    }
  }
  return found ? n : null
}

export const hasProcStat = existsSync(`/proc/${process.pid}/stat`)

/** Wait for a line on a child's stdout matching `re`; reject on exit or timeout. */
export function waitForLine(child, re, ms, name) {
  return new Promise((resolve, reject) => {
    let buf = ''
    const onData = (d) => {
      buf += d
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const line = buf.slice(0, i)
        buf = buf.slice(i + 1)
        const m = line.match(re)
        if (m) {
          done()
          resolve(m)
          return
        }
      }
    }
    const onExit = (code, signal) => {
      done()
      reject(Object.assign(new Error(`${name} exited (${signal ?? code}) before it was ready`), { code, signal, buf }))
    }
    const timer = setTimeout(() => {
      done()
      reject(new Error(`${name} not ready after ${ms} ms`))
    }, ms)
    function done() {
      clearTimeout(timer)
      child.stdout.off('data', onData)
      child.off('exit', onExit)
    }
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', onData)
    child.once('exit', onExit)
  })
}

/**
 * Start a private redis-server on a free port (127.0.0.1 only, no persistence), pinned to `core`.
 * Returns { url, port, pid, child, stop }.
 */
export async function startRedis(core) {
  const port = await freePort()
  if (port === 6379) throw new Error('refusing to use port 6379')
  const [cmd, args] = pinned(core, 'redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--protected-mode',
    'yes',
    '--daemonize',
    'no',
    '--loglevel',
    'warning',
  ])
  const child = spawnTracked('redis-server', cmd, args)
  let log = ''
  child.stdout.on('data', (d) => (log = (log + d).slice(-4000)))
  child.stderr.on('data', (d) => (log = (log + d).slice(-4000)))
  const url = `redis://127.0.0.1:${port}`
  const { Redis } = await import('ioredis')
  const started = Date.now()
  for (;;) {
    if (!alive(child)) throw new Error(`redis-server exited at start:\n${log}`)
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
    probe.on('error', () => {})
    try {
      await probe.connect()
      await probe.ping()
      probe.disconnect()
      break
    } catch {
      probe.disconnect()
      if (Date.now() - started > 10_000) throw new Error(`redis-server on port ${port} not reachable after 10 s:\n${log}`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  return { url, port, pid: child.pid, child, stop: () => stopChild(child) }
}

export function checkTools(tools) {
  const missing = tools.filter((t) => !which(t))
  if (missing.length) {
    const apt = missing.join(' ')
    process.stderr.write(
      `missing: ${missing.join(', ')}\n` +
        `install with:  sudo apt-get install ${apt}     (Debian/Ubuntu)\n` +
        `               brew install ${missing.map((m) => (m === 'redis-server' ? 'redis' : m)).join(' ')}   (macOS)\n`,
    )
    process.exit(1)
  }
  if (!canPin) {
    process.stderr.write(
      'warning: cannot pin processes to cores (need taskset from util-linux and at least 2 CPUs); numbers will be noisier\n',
    )
  }
}
