import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { distDir, REPO_ROOT } from '../harness/built-packages'
import { reapWhenProcessEnds } from '../harness/orphan-reaper'

// The runtimes of test/runtimes: Bun and Deno from their npm packages (root devDependencies; how their binaries
// are found, with or without install scripts, is in scripts/runtimes.cjs), Node as it runs the tests.

export type Runtime = 'bun' | 'deno' | 'node'

const installs = require('../../scripts/runtimes.cjs') as {
  runtimeInstall(runtime: 'bun' | 'deno'): { binary: string; version: string }
}
const FIXTURES = join(__dirname, 'fixtures')
const START_TIMEOUT_MS = 20_000
const STOP_GRACE_MS = 2000

/** The binary of `runtime`; throws, naming what to install, when it is missing (never a skip). */
export function runtimeBinary(runtime: Runtime): string {
  return runtime === 'node' ? process.execPath : installs.runtimeInstall(runtime).binary
}

/** The runtime and its version, for titles: "bun 1.4.5", "deno 2.9.6", "node v20.20.2". */
export function runtimeVersion(runtime: Runtime): string {
  if (runtime === 'node') return `node ${process.version}`
  const { version } = installs.runtimeInstall(runtime)
  return `${runtime} ${/\d+\.\d+\.\d+\S*/.exec(version)?.[0] ?? version}`
}

/** The command line that runs the fixture server of `runtime` (test/runtimes/fixtures). */
function commandLine(runtime: Runtime): string[] {
  const fixture = join(FIXTURES, `${runtime}-server.mjs`)
  if (runtime !== 'deno') return [fixture]
  // Deno's permissions: listening on and connecting to 127.0.0.1 (the app, Redis), and the environment.
  return ['run', '--no-prompt', '--allow-net=127.0.0.1', '--allow-env', fixture]
}

/** A fixture server in a runtime process this file started. */
export interface RuntimeServer {
  readonly runtime: Runtime
  readonly pid: number
  /** `http://127.0.0.1:PORT` */
  readonly url: string
  /** SIGTERM, then SIGKILL after 2 s; resolves once the process has exited. Idempotent. */
  stop(): Promise<void>
}

/**
 * Starts the fixture server of `runtime` with `env` added to this process's environment (see
 * fixtures/app.mjs), listening on a free port of 127.0.0.1 that it prints once listening. The built
 * packages are what it loads: `npm run build` first (npm test does).
 */
export async function startServer(runtime: Runtime, env: Record<string, string> = {}): Promise<RuntimeServer> {
  if (!existsSync(join(distDir('@tollgate/web'), 'index.js'))) throw new Error('@tollgate/web is not built: run npm run build')
  const child = spawn(runtimeBinary(runtime), commandLine(runtime), {
    cwd: REPO_ROOT,
    // No update check (no network here); STORE unset unless `env` sets it, whatever the caller's environment says.
    env: { ...process.env, STORE: '', DENO_NO_UPDATE_CHECK: '1', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  reapWhenProcessEnds(child, exited)
  let output = ''
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    output = (output + chunk).slice(-4000)
  })
  return await new Promise<RuntimeServer>((resolve, reject) => {
    let first = ''
    const onData = (chunk: string) => {
      first += chunk
      const end = first.indexOf('\n')
      if (end < 0) return
      done()
      const port = Number(first.slice(0, end).trim())
      if (Number.isInteger(port) && port > 0)
        resolve({ runtime, pid: child.pid!, url: `http://127.0.0.1:${port}`, stop: () => stop(child, exited) })
      else fail(`printed ${JSON.stringify(first.slice(0, end))} where its port was expected`)
    }
    const onError = (error: Error) => fail(`did not start: ${error.message}`)
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => fail(`exited with ${signal ?? code} before it listened`)
    const timer = setTimeout(() => fail(`did not print its port within ${START_TIMEOUT_MS / 1000} s`), START_TIMEOUT_MS)
    const done = () => {
      clearTimeout(timer)
      child.stdout!.off('data', onData)
      child.off('error', onError)
      child.off('exit', onExit)
      // What it prints later is read and dropped, so a full pipe never stalls it.
      child.stdout!.resume()
    }
    function fail(why: string) {
      done()
      void stop(child, exited)
      reject(new Error(`${runtime} (${commandLine(runtime).join(' ')}) ${why}; its stderr:\n${output || '(nothing)'}`))
    }
    child.stdout!.setEncoding('utf8').on('data', onData)
    child.once('error', onError)
    child.once('exit', onExit)
  })
}

async function stop(child: ChildProcess, exited: Promise<void>): Promise<void> {
  // A process that never started (child.pid undefined) has nothing to stop and emits no 'exit'.
  if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS)
    await exited
    clearTimeout(timer)
  }
}
