import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { reapWhenProcessEnds } from '../harness/orphan-reaper'

/**
 * Where a Debian binary the docs tests drive is (prometheus, promtool, chromium), or undefined. Without it
 * the test is skipped with a printed reason on a developer's machine, and fails under CI (`CI` or
 * `TOLLGATE_CI` set), where .ci/run installs it: a CI run must never pass by skipping.
 */
export function findBinary(name: string): string | undefined {
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' })
  const path = found.stdout.trim()
  return found.status === 0 && path !== '' ? path : undefined
}

export const IN_CI = Boolean(process.env.CI || process.env.TOLLGATE_CI)

/** `describe`, or `describe.skip` with the reason printed, when a binary is missing outside CI. */
export function describeWith(binaries: readonly string[], install: string): jest.Describe {
  const missing = binaries.filter((b) => findBinary(b) === undefined)
  if (missing.length === 0) return describe
  if (IN_CI) {
    // Fails every test of the block, naming what .ci/run should have installed.
    return ((name: string, fn: () => void) =>
      describe(name, () => {
        it(`has ${missing.join(', ')} on PATH`, () => {
          throw new Error(`${missing.join(', ')} not found on PATH under CI: ${install}`)
        })
        void fn
      })) as unknown as jest.Describe
  }
  console.warn(`Skipping: ${missing.join(', ')} not found on PATH (${install}; under CI=1 this fails instead)`)
  return describe.skip
}

/** A child this test started, with its output kept for a failure message. */
export interface Child {
  readonly process: ChildProcess
  output(): string
  /** SIGTERM to its PID, SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>
}

export function startChild(command: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Child {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] })
  const exited = once(child, 'exit')
  // If jest dies before stop() runs, the harness's watchdog kills this PID.
  reapWhenProcessEnds(child, exited)
  let output = ''
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-20_000)
  }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  return {
    process: child,
    output: () => output,
    async stop(graceMs = 3000) {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
      await exited
      clearTimeout(timer)
    },
  }
}

/** Polls `check` every 100 ms until it returns a value other than undefined, or throws after `timeoutMs` naming `what`. */
export async function waitFor<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  while (Date.now() < deadline) {
    try {
      const value = await check()
      if (value !== undefined) return value
    } catch (error) {
      last = error
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`)
}
