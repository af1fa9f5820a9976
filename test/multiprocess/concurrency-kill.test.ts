import { type ChildProcess, spawn } from 'node:child_process'
import { createServer, request } from 'node:http'
import { join } from 'node:path'
import { Limiter, RedisStore, rateLimit } from '@tollgate/express'
import express from 'express'
import { REPO_ROOT } from '../harness/built-packages'
import { keysWithoutTtl, redisUrl, testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { close, get, listen } from '../support/http'
import { sleep } from '../support/time'

// Two server processes share a concurrency cap through Redis. One is killed (SIGKILL, by its PID) with
// three requests in flight: it never releases their slots, so the other process refuses the client
// until the window, the longest a slot is held, has passed; then the slots free themselves. The
// clocks are injected (the child's fixed at the admission, this process's moved by hand), so the
// window passes without waiting for it.
const db = useRedis({ nodeRedis: true })
const children: ChildProcess[] = []
const WINDOW = 60_000

afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
})

function startWorker(env: Record<string, string>): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [join(__dirname, 'concurrency-worker.mjs')], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  children.push(child)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('worker did not start within 10 s (is the package built? npm run build)')), 10_000)
    child.once('exit', (code) => reject(new Error(`worker exited with ${code} (is the package built? npm run build)`)))
    child.stdout!.once('data', (chunk: Buffer) => {
      clearTimeout(timer)
      resolve({ child, port: Number(chunk.toString().trim()) })
    })
  })
}

/** A request that stays in flight; the promise settles when its connection ends (here: the server process dies). */
function hang(url: string): Promise<void> {
  return new Promise((resolve) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume()
      res.on('close', () => resolve())
    })
    req.on('error', () => resolve())
    req.end()
  })
}

async function until(what: string, done: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + 10_000
  while (!(await done())) {
    if (Date.now() > end) throw new Error(`still waiting after 10 s: ${what}`)
    await sleep(20)
  }
}

it.each(['ioredis', 'node-redis'])(
  'through %s: the slots of a process killed mid-request hold for the window, then free themselves for the other process',
  async (clientName) => {
    const prefix = testPrefix('concurrency-kill')
    const admitted = Math.floor(Date.now() / 1000) * 1000
    const { child, port } = await startWorker({ REDIS_URL: redisUrl(), PREFIX: prefix, NOW: String(admitted), CLIENT: clientName })

    // The other process: this one, on the same Redis and prefix, with a clock the test moves.
    let now = admitted + 1000
    const store = new RedisStore({ client: clientName === 'node-redis' ? db.nodeRedis : db.client, timeout: '2s' })
    const options = { algorithm: 'concurrency', max: 3, window: WINDOW, prefix, store, clock: () => now } as const
    const app = express()
    app.use(rateLimit(options))
    app.get('/', (_req, res) => void res.send('ok'))
    const server = createServer(app)
    const url = await listen(server)
    // Reads the shared slots; it shares the app's prefix on purpose, so its warning about that is silenced.
    const observer = new Limiter({ ...options, logger: { warn: () => {}, error: () => {} } })
    try {
      const inFlight = Array.from({ length: 3 }, () => hang(`http://127.0.0.1:${port}/slow`))
      await until('the worker holds 3 slots', async () => (await observer.peek('127.0.0.1')).remaining === 0)

      process.kill(child.pid!, 'SIGKILL')
      await Promise.all(inFlight) // the connections died with the process
      expect(child.signalCode ?? (await new Promise((r) => child.once('exit', (_c, s) => r(s))))).toBe('SIGKILL')

      const refused = await get(`${url}/`)
      expect([refused.status, refused.headers['retry-after']]).toEqual([429, '1'])
      now = admitted + WINDOW - 1
      expect((await get(`${url}/`)).status).toBe(429)
      now = admitted + WINDOW
      const served = await Promise.all(Array.from({ length: 3 }, () => get(`${url}/`)))
      expect(served.map((r) => r.status)).toEqual([200, 200, 200])
      expect((await observer.peek('127.0.0.1')).remaining).toBe(3)
      expect(await keysWithoutTtl(db.client, prefix)).toEqual([])
    } finally {
      await close(server)
    }
  },
)
