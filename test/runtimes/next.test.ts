import { type ChildProcess, spawn } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { dirname, join } from 'node:path'
import { REPO_ROOT } from '../harness/built-packages'
import { reapWhenProcessEnds } from '../harness/orphan-reaper'
import { BURST, expressBurst, MAX, type Seen, seen, startOfSecond } from '../support/demo-burst'
import { get, type Reply } from '../support/http'
import { withinOneSecond } from '../support/real-clock-burst'

/*
 * Tollgate in a Next.js app as users run one: `next build`, then `next start` on 127.0.0.1, reached over
 * HTTP. The app (fixtures/next) is copied into the repository's git-ignored .tmp/, where Next resolves
 * `next`, React and @tollgate/web through the repository's node_modules (so @tollgate/web is its BUILT
 * dist: `npm run build` first) and writes what it builds; the copy is removed afterwards. One build per
 * run, shared by every test here. Two ways to limit: a route handler wrapped by withRateLimit
 * (app/route.ts) and the proxy in front of /api (proxy.ts).
 */

const FIXTURE = join(__dirname, 'fixtures', 'next')
const NEXT = join(dirname(require.resolve('next/package.json')), 'dist', 'bin', 'next')
const BUILD_TIMEOUT_MS = 300_000
const START_TIMEOUT_MS = 60_000

/**
 * Next's own environment: jest's NODE_ENV=test would make `next build` a non-standard build. CI=1, because
 * outside CI a build that misses a package it wants (@types/react for a TypeScript app) runs `npm install`
 * into the repository; in CI it fails, naming the package, which belongs in the root devDependencies.
 */
function nextEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_ENV: 'production', NEXT_TELEMETRY_DISABLED: '1', CI: '1' }
  delete env.JEST_WORKER_ID
  return env
}

/** Runs Next with `args` in `cwd`; reaped if this process ends first. */
function next(args: string[], cwd: string): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [NEXT, ...args], { cwd, env: nextEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString()
  })
  child.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString()
  })
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code))
    child.once('error', () => resolve(null))
  })
  reapWhenProcessEnds(child, exited)
  return { child, output: () => output, exited }
}

/** A port of 127.0.0.1 free a moment ago (next start takes a port number, not 0). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/** Waits until `pattern` shows in the output, failing when the process ends first or `ms` pass. */
async function waitFor(run: ReturnType<typeof next>, pattern: RegExp, ms: number): Promise<void> {
  const started = Date.now()
  let ended = false
  void run.exited.then(() => {
    ended = true
  })
  while (!pattern.test(run.output())) {
    if (ended || Date.now() - started > ms)
      throw new Error(`next did not print ${pattern} (${ended ? 'it ended' : `${ms} ms`}):\n${run.output()}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

let app: string
let server: ReturnType<typeof next> | undefined
let origin: string

beforeAll(
  async () => {
    mkdirSync(join(REPO_ROOT, '.tmp'), { recursive: true })
    app = mkdtempSync(join(REPO_ROOT, '.tmp', 'next-app-'))
    cpSync(FIXTURE, app, { recursive: true })

    const started = Date.now()
    const build = next(['build'], app)
    const timer = setTimeout(() => build.child.kill('SIGKILL'), BUILD_TIMEOUT_MS)
    const code = await build.exited
    clearTimeout(timer)
    if (code !== 0) throw new Error(`next build exited ${code}:\n${build.output()}`)
    console.log(`next build: ${((Date.now() - started) / 1000).toFixed(1)} s`)

    const port = await freePort()
    server = next(['start', '--hostname', '127.0.0.1', '--port', String(port)], app)
    origin = `http://127.0.0.1:${port}`
    await waitFor(server, /Ready in/, START_TIMEOUT_MS)
  },
  BUILD_TIMEOUT_MS + START_TIMEOUT_MS + 10_000,
)

afterAll(async () => {
  if (server !== undefined) {
    // Next ends on SIGTERM once its connections close; a server that does not is ended outright.
    server.child.kill('SIGTERM')
    const timer = setTimeout(() => server?.child.kill('SIGKILL'), 10_000)
    await server.exited
    clearTimeout(timer)
  }
  if (app !== undefined) rmSync(app, { recursive: true, force: true })
}, 30_000)

const seenOf = (reply: Reply): Seen => seen(reply.status, (name) => reply.headers[name] as string | undefined, reply.body)

/** The demo burst on `path` from this process (no X-Forwarded-For of its own), then `more` requests. */
function burstOn(path: string, more: Record<string, string>[] = []): Promise<{ burst: Seen[]; after: Seen[] }> {
  return withinOneSecond(async () => {
    const burst: Seen[] = []
    for (let i = 0; i < BURST; i++) burst.push(seenOf(await get(`${origin}${path}`)))
    const after: Seen[] = []
    for (const headers of more) after.push(seenOf(await get(`${origin}${path}`, { headers })))
    return { burst, after }
  })
}

describe('a Next.js route handler wrapped by withRateLimit, under next start', () => {
  it('answers the demo burst with ten 200s and two 429s, field for field as Express', async () => {
    const { burst } = await burstOn('/')
    expect(burst.map((s) => s.status)).toEqual([...Array(MAX).fill(200), 429, 429])
    expect(burst[0]).toMatchObject({ ratelimit: '"10-per-1s";r=9;t=1', policy: '"10-per-1s";q=10;w=1' })
    expect(burst).toEqual(await expressBurst(startOfSecond()))
  })

  it('keys by the address next start writes into X-Forwarded-For, and by the header as the client sent it', async () => {
    // Named as next start wrote it, the burst's client is still over the limit. A header the client
    // wrote itself is kept as it came (Next fills the header only when it is missing), so facing clients
    // directly, a client chooses its key: the reason to run next start behind a proxy that writes it.
    const { burst, after } = await burstOn('/', [{ 'x-forwarded-for': '127.0.0.1' }, { 'x-forwarded-for': '203.0.113.9' }])
    expect(burst.filter((s) => s.status === 200)).toHaveLength(MAX)
    expect(after.map((s) => s.status)).toEqual([429, 200])
  })
})

describe('a Next.js proxy (proxy.ts) limiting the routes behind it', () => {
  it('answers the demo burst on a route behind it with ten 200s and two 429s, field for field as Express', async () => {
    const { burst, after } = await burstOn('/api/hello', [{ 'x-forwarded-for': '127.0.0.1' }, { 'x-forwarded-for': '203.0.113.9' }])
    expect(burst.map((s) => s.status)).toEqual([...Array(MAX).fill(200), 429, 429])
    expect(burst).toEqual(await expressBurst(startOfSecond()))
    expect(after.map((s) => s.status)).toEqual([429, 200])
  })
})
