import { type ChildProcess, spawn } from 'node:child_process'
import { rmSync } from 'node:fs'

// Children still running, with the temp dir each one owns, for the exit hook.
const live = new Map<ChildProcess, string | undefined>()
let exitHookRegistered = false

function registerExitHook(): void {
  if (exitHookRegistered) return
  exitHookRegistered = true
  // Covers plain Node and jest's globalSetup process. Inside a jest test file `process` is a sandboxed
  // copy whose 'exit' listeners never fire (checked with jest 29), which is why the watchdog exists.
  process.on('exit', () => {
    for (const [child, dir] of live) {
      child.kill('SIGKILL')
      // 'exit' listeners must be synchronous, hence rmSync.
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    }
  })
}

// A tiny Node process that holds the read end of a pipe from us. When our process ends in any way
// (normal exit, crash, SIGKILL of a jest worker) the pipe closes and it SIGKILLs every PID we told it
// about and have not yet seen exit, then removes their temp dirs. It only ever learns PIDs (and dirs)
// this harness created. Protocol, one line each: "+PID DIR" when spawned, "-PID" once exited.
const WATCHDOG_SOURCE = `
const pids = new Map()
let buf = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (d) => {
  buf += d
  let i
  while ((i = buf.indexOf('\\n')) >= 0) {
    const line = buf.slice(0, i)
    buf = buf.slice(i + 1)
    const space = line.indexOf(' ')
    const pid = Number(line.slice(1, space < 0 ? undefined : space))
    if (!Number.isInteger(pid) || pid <= 0) continue
    if (line[0] === '+') pids.set(pid, space < 0 ? '' : line.slice(space + 1))
    else pids.delete(pid)
  }
})
const killAll = () => {
  for (const pid of pids.keys()) { try { process.kill(pid, 'SIGKILL') } catch {} }
  for (const dir of pids.values()) { if (dir) { try { require('fs').rmSync(dir, { recursive: true, force: true }) } catch {} } }
  process.exit(0)
}
process.stdin.on('end', killAll)
process.stdin.on('close', killAll)
`

let watchdog: ChildProcess | undefined

function tellWatchdog(line: string): void {
  if (watchdog === undefined) {
    const child = spawn(process.execPath, ['-e', WATCHDOG_SOURCE], { stdio: ['pipe', 'ignore', 'ignore'] })
    child.on('error', () => {
      // Losing the watchdog only weakens orphan cleanup; the exit hook and stop() still work.
    })
    child.stdin?.on('error', () => {})
    // Neither the watchdog nor its pipe may keep a test process alive.
    child.unref()
    ;(child.stdin as unknown as { unref?: () => void } | null)?.unref?.()
    watchdog = child
  }
  watchdog.stdin?.write(`${line}\n`)
}

/**
 * Makes sure `child` is SIGKILLed, and `dir` (its temp dir, if any) removed, if it still runs when
 * this process ends, so an aborted test run leaves nothing behind. `exited` must settle when the
 * child exits; from then on its PID is forgotten, so a reused PID is never signalled, and removing
 * `dir` becomes the owner's job again.
 */
export function reapWhenProcessEnds(child: ChildProcess, exited: Promise<unknown>, dir?: string): void {
  const pid = child.pid
  if (pid === undefined) return // spawn failed: nothing to reap
  live.set(child, dir)
  registerExitHook()
  // The watchdog protocol is line-based; a (very unlikely) TMPDIR with a line break only loses its dir cleanup.
  tellWatchdog(dir === undefined || /[\r\n]/.test(dir) ? `+${pid}` : `+${pid} ${dir}`)
  void exited.then(() => {
    live.delete(child)
    tellWatchdog(`-${pid}`)
  })
}
