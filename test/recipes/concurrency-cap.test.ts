import { type ChildProcess, spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import { REPO_ROOT } from '../harness/built-packages'
import { keysWithoutTtl, redisUrl } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import type { Reply } from '../support/http'

// docs/recipes/concurrency-cap.md: its first TypeScript block is run as a user runs it (tsx, the built
// packages from node_modules, a real Redis), and does what the recipe says: two requests of one API key
// in flight at once, the third refused with the concurrency fields, another key unaffected, and the
// slots free once the answers are sent.
const db = useRedis()
const RECIPE = join(REPO_ROOT, 'docs', 'recipes', 'concurrency-cap.md')
let dir: string
let child: ChildProcess | undefined

beforeAll(() => {
  mkdirSync(join(REPO_ROOT, '.tmp'), { recursive: true })
  dir = mkdtempSync(join(REPO_ROOT, '.tmp', 'recipe-'))
})
afterAll(() => {
  if (child !== undefined && child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
  rmSync(dir, { recursive: true, force: true })
})

/** One POST over its own connection. */
function post(url: string, headers: Record<string, string>, body: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers, agent: false, timeout: 20_000 }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        text += chunk
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }))
    })
    req.on('timeout', () => req.destroy(new Error(`POST ${url} timed out`)))
    req.on('error', reject)
    req.end(body)
  })
}

/** The recipe's first ```ts block. */
function example(): string {
  const block = /```ts\n([\s\S]*?)```/.exec(readFileSync(RECIPE, 'utf8'))
  if (block === null) throw new Error(`no \`\`\`ts block in ${RECIPE}`)
  return block[1]!
}

function start(env: Record<string, string>): Promise<number> {
  const file = join(dir, 'server.ts')
  writeFileSync(file, example())
  child = spawn(process.execPath, ['--import', 'tsx', file], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const started = child
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the recipe did not start within 20 s (is the package built? npm run build)')), 20_000)
    started.once('exit', (code) => reject(new Error(`the recipe exited with ${code}`)))
    let out = ''
    started.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const port = /listening on port (\d+)/.exec(out)?.[1]
      if (port !== undefined) {
        clearTimeout(timer)
        resolve(Number(port))
      }
    })
  })
}

it('caps the requests of one API key in flight at 2, refuses the third with 429, and frees the slots when the answers end', async () => {
  // The model answers in 3 s: the requests sent together are all in flight when each is decided.
  const port = await start({ REDIS_URL: redisUrl(), PORT: '0', MODEL_MS: '3000' })
  const url = `http://127.0.0.1:${port}/v1/completions`
  // Keys of this run only: the recipe's prefix is fixed, and the shared server outlives a run.
  const [alice, bob] = [`alice-${randomUUID()}`, `bob-${randomUUID()}`]
  const ask = (key: string) => post(url, { 'x-api-key': key, 'content-type': 'application/json' }, '{"prompt":"hi"}')
  const aliceAsks = [ask(alice), ask(alice), ask(alice)]
  const bobAsks = ask(bob)
  const replies = await Promise.all(aliceAsks)
  expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 429])
  const refused = replies.find((r) => r.status === 429)!
  expect(refused.headers).toMatchObject({
    'retry-after': '1',
    'ratelimit-policy': '"2-concurrent";q=2;qu="concurrent-requests"',
    ratelimit: '"2-concurrent";r=0;t=1',
  })
  expect(JSON.parse(replies.find((r) => r.status === 200)!.body)).toEqual({ text: 'You said: hi' })
  expect((await bobAsks).status).toBe(200)
  // Both answers were sent: alice's two slots are free again.
  expect((await Promise.all([ask(alice), ask(alice)])).map((r) => r.status)).toEqual([200, 200])
  expect(await keysWithoutTtl(db.client, 'tg:inference:')).toEqual([])
}, 60_000)
