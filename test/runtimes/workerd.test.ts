import { join } from 'node:path'
import { build } from 'esbuild'
import { Miniflare } from 'miniflare'
import { REPO_ROOT } from '../harness/built-packages'
import { BURST, expressBurst, MAX, type Seen, seen, startOfSecond } from '../support/demo-burst'
import { get, type Reply } from '../support/http'
import { withinOneSecond } from '../support/real-clock-burst'

/*
 * Tollgate in Cloudflare's runtime, workerd, run by Miniflare in a process of its own and reached over HTTP
 * on 127.0.0.1, as a client reaches a Worker. The Workers are bundled as wrangler bundles them: esbuild for
 * the browser platform with the workerd conditions, from the BUILT packages through node_modules (so
 * `npm run build` first). One Miniflare runs them all, each Worker an isolate of its own:
 * - `burst` (fixtures/workerd/burst.ts): the demo app, keyed by CF-Connecting-IP without being told;
 * - `w0`..`w3` (fixtures/workerd/instance.ts): one script deployed four times, routed by host name, on
 *   the Durable Object namespace of w0's TollgateCounter; four isolates with four limiters, as four
 *   instances of one Worker at Cloudflare.
 * Four Miniflare instances cannot stand for the four: a Durable Object namespace belongs to the workerd
 * process that runs its class. Miniflare binds a namespace only to a Worker of the same instance, and four
 * processes sharing one folder of stored objects would each run a live copy of every object, with counts
 * of its own: the opposite of the one object per key that makes the counts exact.
 */

const FIXTURES = join(__dirname, 'fixtures', 'workerd')
const INSTANCES = ['w0', 'w1', 'w2', 'w3'] as const
/** The optional peers stay outside, as for an app that does not install them. */
const OPTIONAL_PEERS = ['@opentelemetry/api', 'ioredis', 'redis']
const COMPATIBILITY_DATE = '2025-07-01'

/** A fixture Worker as one ES module, from the built packages; fails on any input from a package's sources. */
async function bundle(file: string): Promise<string> {
  const result = await build({
    entryPoints: [join(FIXTURES, file)],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    conditions: ['workerd', 'worker', 'browser'],
    target: 'es2022',
    // No tsconfig: the root one maps @tollgate/* to the sources; an app resolves them through node_modules.
    tsconfigRaw: {},
    external: OPTIONAL_PEERS,
    metafile: true,
    write: false,
    logLevel: 'silent',
    absWorkingDir: REPO_ROOT,
  })
  const inputs = Object.keys(result.metafile.inputs)
  const sources = inputs.filter((input) => /^packages\/[^/]+\/src\//.test(input))
  if (sources.length > 0 || !inputs.includes('packages/web/dist/index.js')) {
    throw new Error(`the Worker ${file} is not bundled from the built packages: ${inputs.join(', ')}`)
  }
  return result.outputFiles[0]!.text
}

/**
 * A bundle as the one module of a Worker, listed as wrangler lists what it uploads: Miniflare then leaves
 * its imports to workerd, which rejects at run time the import() of an optional peer the app lacks (and
 * the bundle catches), where Miniflare's own scan of a `script` refuses any import it cannot resolve.
 */
const asModule = (name: string, contents: string) => [{ type: 'ESModule' as const, path: join(FIXTURES, `${name}.mjs`), contents }]

let miniflare: Miniflare
let origin: string

beforeAll(async () => {
  const [burst, instance] = await Promise.all([bundle('burst.ts'), bundle('instance.ts')])
  miniflare = new Miniflare({
    host: '127.0.0.1',
    port: 0,
    workers: [
      // The first Worker answers every host no route names.
      { name: 'burst', modules: asModule('burst', burst), compatibilityDate: COMPATIBILITY_DATE },
      ...INSTANCES.map((name) => ({
        name,
        modules: asModule(name, instance),
        compatibilityDate: COMPATIBILITY_DATE,
        routes: [`${name}.test/*`],
        bindings: { NAME: name },
        durableObjects: { TOLLGATE: { className: 'TollgateCounter', scriptName: 'w0' } },
      })),
    ],
    // What the Workers log is not the test's output; workerd's errors still are.
    handleRuntimeStdio(stdout, stderr) {
      stdout.resume()
      stderr.pipe(process.stderr)
    },
  })
  origin = (await miniflare.ready).origin
}, 60_000)

afterAll(() => miniflare?.dispose())

const seenOf = (reply: Reply): Seen => seen(reply.status, (name) => reply.headers[name] as string | undefined, reply.body)

describe('the demo app as a Worker in workerd', () => {
  it('answers the demo burst with ten 200s and two 429s, field for field as Express, keyed by CF-Connecting-IP', async () => {
    const { burst, other, again } = await withinOneSecond(async () => {
      const burst: Seen[] = []
      for (let i = 0; i < BURST; i++) burst.push(seenOf(await get(`${origin}/`)))
      // The burst was counted under the address of its connection, which Miniflare wrote into
      // CF-Connecting-IP as the edge writes the client's: named there, it is still over the limit, and
      // another client has a count of its own.
      const again = seenOf(await get(`${origin}/`, { headers: { 'cf-connecting-ip': '127.0.0.1' } }))
      const other = seenOf(await get(`${origin}/`, { headers: { 'cf-connecting-ip': '203.0.113.9' } }))
      return { burst, other, again }
    })
    expect(burst.map((s) => s.status)).toEqual([...Array(MAX).fill(200), 429, 429])
    expect(burst[0]).toMatchObject({ ratelimit: '"10-per-1s";r=9;t=1', policy: '"10-per-1s";q=10;w=1' })
    expect(burst[11]).toMatchObject({ retryAfter: '1', cacheControl: 'no-store', contentType: 'application/problem+json' })
    expect(burst).toEqual(await expressBurst(startOfSecond()))
    expect([other.status, other.ratelimit]).toEqual([200, '"10-per-1s";r=9;t=1'])
    expect(again.status).toBe(429)
  })
})

interface Answer {
  worker: string
  status: number
  source: string
}

/** `n` requests of one client sent at once, spread over the four Workers in turn, each on a connection of its own. */
async function spread(path: string, client: string, n: number): Promise<Answer[]> {
  const replies = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      get(`${origin}${path}`, {
        headers: { host: `${INSTANCES[i % INSTANCES.length]}.test`, 'cf-connecting-ip': client },
        timeoutMs: 60_000,
      }),
    ),
  )
  return replies.map((r) => ({ worker: String(r.headers['x-worker']), status: r.status, source: String(r.headers['x-decision-source']) }))
}

const perWorker = (answers: Answer[], keep: (a: Answer) => boolean) =>
  Object.fromEntries(INSTANCES.map((name) => [name, answers.filter((a) => a.worker === name && keep(a)).length]))

describe('four Workers on one Durable Object namespace', () => {
  const N = 1000
  const MAX_SHARED = 100

  it('admit exactly max of 1,000 concurrent requests of one client, every decision from the store', async () => {
    const answers = await spread('/', '198.51.100.7', N)
    expect(perWorker(answers, () => true)).toEqual({ w0: 250, w1: 250, w2: 250, w3: 250 })
    expect(answers.filter((a) => a.status !== 200 && a.status !== 429)).toEqual([])
    expect(answers.filter((a) => a.status === 200)).toHaveLength(MAX_SHARED)
    // Admitted by the object's count; refused by it, or by the isolate's cache of its "over" answer,
    // which only a refusal from the store fills. Never by a failure policy.
    expect(answers.filter((a) => a.status === 200 && a.source !== 'store')).toEqual([])
    expect(answers.filter((a) => a.status === 429 && a.source !== 'store' && a.source !== 'cache')).toEqual([])
    for (const name of INSTANCES) {
      const refusals = answers.filter((a) => a.worker === name && a.status === 429)
      if (refusals.some((a) => a.source === 'cache')) expect(refusals.some((a) => a.source === 'store')).toBe(true)
    }
    // The admissions were shared out among the instances, not all made by one of them.
    expect(Object.values(perWorker(answers, (a) => a.status === 200)).filter((n) => n > 0).length).toBeGreaterThan(1)
  }, 120_000)

  it('admit max each when each counts in its own memory: four isolates, four counts', async () => {
    const answers = await spread('/own', '198.51.100.8', N)
    expect(perWorker(answers, (a) => a.status === 200)).toEqual({ w0: MAX_SHARED, w1: MAX_SHARED, w2: MAX_SHARED, w3: MAX_SHARED })
  }, 120_000)
})
