// The external suite: Tollgate as a new user gets it. Every package is packed with `npm pack`;
// each tarball's contents and package.json are checked, then linted by publint and by
// @arethetypeswrong/cli (the analysis `attw --pack` runs, on the very tarball installed below). The
// tarballs are installed into scratch projects in a temporary directory outside the repository (see
// projects/: Express compiled to CommonJS, Express as an ES module, Fastify in TypeScript with
// `module: nodenext` and strict, Koa, a NestJS app compiled with experimentalDecorators), each is compiled when it is TypeScript and started, and real
// HTTP requests on 127.0.0.1 check that with `max: 2` the third request is refused with a 429. One project is a
// store author's instead (store-author): a store of its own, checked under node:test by the contract suite that
// @tollgate/core/testing ships.
//
//   node test/external/run.mjs [--no-build] [--keep]
//
// A project with a variants.json runs once per entry, with the exact versions it names: redis-client (an Express
// app counting in a redis-server the suite starts) beside each supported major of ioredis and node-redis, the NestJS
// apps on each supported NestJS major, the Fastify app under TypeScript 5 and 7.
//
// Only the npm registry is needed: the frameworks and TypeScript are installed at the versions the
// monorepo's lockfile holds, which `npm ci` has just put in npm's cache (--prefer-offline), or at a variant's.
import { AsyncLocalStorage } from 'node:async_hooks'
import { spawn, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
const projectsDir = join(root, 'test', 'external', 'projects')
const PACKAGES = ['core', 'express', 'fastify', 'koa', 'nestjs', 'web', 'hono']
const args = new Set(process.argv.slice(2))
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const bin = (name) => join(root, 'node_modules', '.bin', name)

// The packages are packed and the projects run two at a time (one per core: most of their time is npm, tsc and
// attw), each one's lines held until it ends so that two never interleave.
const output = new AsyncLocalStorage()
const say = (line) => {
  const lines = output.getStore()
  if (lines) lines.push(line)
  else console.log(line)
}
/** Runs `task(item)` for each item, two at a time, printing each one's lines when it ends. */
async function twoAtATime(items, task) {
  const queue = [...items]
  const worker = async () => {
    while (queue.length > 0) {
      const item = queue.shift()
      const lines = []
      try {
        await output.run(lines, () => task(item))
      } finally {
        console.log(lines.join('\n'))
      }
    }
  }
  await Promise.all([worker(), worker()])
}

const failures = []
const fail = (what) => {
  failures.push(what)
  say(`  FAIL ${what}`)
}
const ok = (what) => say(`  ok   ${what}`)
const check = (cond, what) => (cond ? ok(what) : fail(what))

function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts })
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`.replace(/^npm warn Unknown user config.*\n/gm, '')
  return { status: r.status, stdout: r.stdout ?? '', out }
}
/** As run, without holding the event loop: the other project's work goes on meanwhile. */
function runAsync(cmd, argv, opts = {}) {
  return new Promise((done) => {
    const child = spawn(cmd, argv, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] })
    const [stdout, stderr] = [[], []]
    child.stdout.on('data', (d) => stdout.push(d))
    child.stderr.on('data', (d) => stderr.push(d))
    const timer = opts.timeout === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), opts.timeout)
    child.on('error', (error) => stderr.push(Buffer.from(String(error))))
    child.on('close', (status) => {
      clearTimeout(timer)
      const out = `${Buffer.concat(stdout)}${Buffer.concat(stderr)}`.replace(/^npm warn Unknown user config.*\n/gm, '')
      done({ status, stdout: Buffer.concat(stdout).toString(), out })
    })
  })
}
const indent = (text) => text.trim().replace(/^/gm, '       ')

// ---------------------------------------------------------------- pack and check the tarballs
const scratch = mkdtempSync(join(tmpdir(), 'tollgate-external-'))
console.log(`external suite: scratch directory ${scratch}`)

if (!args.has('--no-build')) {
  const b = run(npm, ['run', 'build'], { cwd: root })
  if (b.status !== 0) {
    console.log(indent(b.out))
    console.log('external suite: npm run build failed')
    process.exit(1)
  }
}

const versions = Object.fromEntries(
  PACKAGES.map((p) => [p, JSON.parse(readFileSync(join(root, 'packages', p, 'package.json'), 'utf8')).version]),
)
const tarballs = {}
await twoAtATime(PACKAGES, async (p) => {
  const name = `@tollgate/${p}`
  say(`\n${name}`)
  const packed = await runAsync(npm, ['pack', '--json', '--pack-destination', scratch], { cwd: join(root, 'packages', p) })
  if (packed.status !== 0) {
    fail(`${name}: npm pack failed\n${indent(packed.out)}`)
    return
  }
  const info = JSON.parse(packed.stdout)[0] // stdout only: npm's warnings go to stderr, anywhere in it
  const tgz = join(scratch, info.filename)
  tarballs[name] = tgz
  const files = info.files.map((f) => f.path).sort()
  say(`  ${info.filename}, ${info.size} bytes: ${files.join(' ')}`)
  for (const f of ['README.md', 'LICENSE', 'package.json', 'dist/index.js', 'dist/index.cjs', 'dist/index.d.ts', 'dist/index.d.cts']) {
    check(files.includes(f), `holds ${f}`)
  }
  const strays = files.filter((f) => !/^(README\.md|LICENSE|package\.json|dist\/.*)$/.test(f))
  check(strays.length === 0, `holds nothing else (sources, tests, configs)${strays.length ? `: ${strays.join(' ')}` : ''}`)

  // The package.json that is published, read from the tarball itself.
  const pkg = JSON.parse(run('tar', ['-xOzf', tgz, 'package/package.json']).stdout)
  check(pkg.license === 'MIT', `license MIT (${pkg.license})`)
  check(typeof pkg.engines?.node === 'string', `engines.node (${pkg.engines?.node})`)
  check(
    /^git\+https:\/\/.+\.git$/.test(pkg.repository?.url ?? '') && pkg.repository?.directory === `packages/${p}`,
    `repository ${pkg.repository?.url} with directory ${pkg.repository?.directory}`,
  )
  check(pkg.publishConfig?.access === 'public', `publishConfig.access ${pkg.publishConfig?.access}`)
  check(typeof pkg.sideEffects === 'boolean', `sideEffects ${pkg.sideEffects}`)
  check(Array.isArray(pkg.keywords) && pkg.keywords.length > 0, `keywords (${pkg.keywords?.length ?? 0})`)
  check(pkg.version === versions.core, `version ${pkg.version}, the same as every Tollgate package (released together)`)
  for (const [dep, range] of Object.entries({ ...pkg.dependencies, ...pkg.peerDependencies })) {
    const sibling = dep.startsWith('@tollgate/') ? dep.slice('@tollgate/'.length) : null
    if (sibling) check(range === `^${versions[sibling]}`, `depends on ${dep} ${range} (expected ^${versions[sibling]})`)
  }

  const lint = await runAsync(process.execPath, [bin('publint'), 'run', tgz, '--strict'], { cwd: scratch })
  if (lint.status === 0) ok(`publint: ${lint.out.trim().split('\n').pop()}`)
  else fail(`publint\n${indent(lint.out)}`)
  // Exits 1 on any problem in any resolution mode (node10, node16 from CJS and from ESM, bundler).
  const attw = await runAsync(process.execPath, [bin('attw'), tgz, '--format', 'table-flipped', '--no-color', '--no-emoji'], {
    cwd: scratch,
  })
  if (attw.status === 0) ok(`attw: ${/No problems found/.test(attw.out) ? 'no problems found' : 'passed'}`)
  else fail(`attw\n${indent(attw.out)}`)
})

// ---------------------------------------------------------------- scratch projects
// The version of a dependency in the monorepo's node_modules, so the scratch install hits npm's cache.
function monorepoVersion(dep) {
  return JSON.parse(readFileSync(join(root, 'node_modules', dep, 'package.json'), 'utf8')).version
}

function spawnServer(cwd, entry, env = {}) {
  return new Promise((resolvePort, reject) => {
    const child = spawn(process.execPath, [entry], { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
    let out = ''
    const timer = setTimeout(() => {
      child.kill()
      reject(new Error(`no "listening <port>" within 15 s; output:\n${out}`))
    }, 15_000)
    const onData = (chunk) => {
      out += chunk
      const m = /listening (\d+)/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolvePort({ child, port: Number(m[1]), output: () => out })
      }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    child.on('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`exited with ${code} before listening; output:\n${out}`))
    })
  })
}

async function get(port, path) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`)
  return { status: res.status, headers: res.headers, body: await res.text() }
}

// The apps limit to 2 per minute, in windows aligned to the clock's minutes: three requests sent in the
// last moments of a minute would cross into the next window and all pass, so wait that edge out.
async function awayFromWindowEdge(windowMs = 60_000, marginMs = 3_000) {
  const left = windowMs - (Date.now() % windowMs)
  if (left < marginMs) await new Promise((r) => setTimeout(r, left + 50))
}

async function exercise(port, project) {
  await awayFromWindowEdge()
  const replies = []
  for (let i = 0; i < 3; i++) replies.push(await get(port, '/'))
  const statuses = replies.map((r) => r.status).join(' ')
  check(statuses === '200 200 429', `GET / three times with max 2: ${statuses}`)
  const [first, , refused] = replies
  check(
    /"2-per-1m";q=2;w=60/.test(first.headers.get('ratelimit-policy') ?? ''),
    `RateLimit-Policy: ${first.headers.get('ratelimit-policy')}`,
  )
  check(/;r=1;/.test(first.headers.get('ratelimit') ?? ''), `first RateLimit: ${first.headers.get('ratelimit')}`)
  check(/;r=0;/.test(refused.headers.get('ratelimit') ?? ''), `429 RateLimit: ${refused.headers.get('ratelimit')}`)
  check(/^[1-9]\d*$/.test(refused.headers.get('retry-after') ?? ''), `429 Retry-After: ${refused.headers.get('retry-after')}`)
  check(
    refused.headers.get('content-type')?.startsWith('application/problem+json') && JSON.parse(refused.body).status === 429,
    `429 body: ${refused.headers.get('content-type')} ${refused.body.slice(0, 60)}…`,
  )
  check(first.body.includes('"remaining":1'), `handler reads the decision: ${first.body}`)
  if (project === 'redis-client') check(first.body.includes('"source":"store"'), `decided by Redis, not a fallback: ${first.body}`)
  if (project === 'fastify-ts' || project.startsWith('nestjs-')) {
    const health = []
    for (let i = 0; i < 3; i++) health.push(await get(port, '/health'))
    check(
      health.every((r) => r.status === 200 && !r.headers.has('ratelimit')),
      `GET /health (${project.startsWith('nestjs-') ? '@SkipRateLimit()' : 'rateLimit: false'}) three times: ${health.map((r) => r.status).join(' ')}, no headers`,
    )
  }
}

// Projects with tests instead of a server: the command that runs them once they are built (TAP, read below).
const TESTS = {
  'store-author': ['--test', '--test-reporter=tap', 'dist/map-store.test.js'],
}

async function runTests(dir, project) {
  const argv = TESTS[project]
  const r = await runAsync(process.execPath, argv, { cwd: dir, timeout: 120_000 })
  const count = (what) => Number(new RegExp(`^# ${what} (\\d+)$`, 'm').exec(r.stdout)?.[1] ?? Number.NaN)
  const [passed, failed] = [count('pass'), count('fail')]
  const what = `node ${argv.join(' ')}: ${passed} passed, ${failed} failed`
  // The contract alone has more than ten cases for a fixed-window store: fewer means it did not run.
  if (r.status === 0 && failed === 0 && passed > 10) ok(what)
  else fail(`${what}\n${indent(r.out)}`)
}

const ENTRY = {
  'express-cjs': 'dist/server.js',
  'express-esm': 'server.js',
  'fastify-ts': 'dist/server.js',
  koa: 'server.js',
  'nestjs-ts': 'dist/main.js',
  'nestjs-fastify-ts': 'dist/main.js',
  'redis-client': 'server.js',
}

/**
 * The runs of a project: one, or one per entry of its variants.json ({ name, dependencies?, devDependencies?,
 * env? }), each a scratch project of its own with those exact versions: the same app beside each supported
 * major of a client, a framework or TypeScript, installed without flags, as a user of that major would.
 */
function runsOf(project) {
  const file = join(projectsDir, project, 'variants.json')
  if (!existsSync(file)) return [{ name: '', dependencies: {}, devDependencies: {}, env: {} }]
  return JSON.parse(readFileSync(file, 'utf8')).map((v) => ({ dependencies: {}, devDependencies: {}, env: {}, ...v }))
}

/** A redis-server of the suite's own on a free port, started when a project first needs one (REDIS_URL). */
let redisServer
let redisStarted
/** Once, however many projects ask at the same time. */
function redisUrl() {
  redisStarted ??= startRedis()
  return redisStarted
}
async function startRedis() {
  if (redisServer === undefined) {
    const port = await new Promise((resolvePort, reject) => {
      const probe = createServer()
      probe.once('error', reject)
      probe.listen(0, '127.0.0.1', () => {
        const { port } = probe.address()
        probe.close(() => resolvePort(port))
      })
    })
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    })
    redisServer = { child, url: `redis://127.0.0.1:${port}` }
    for (let i = 0; i < 50; i++) {
      const up = await new Promise((r) => {
        const socket = connect(port, '127.0.0.1', () => {
          socket.end()
          r(true)
        })
        socket.on('error', () => r(false))
      })
      if (up) break
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  return redisServer.url
}

try {
  const runs = readdirSync(projectsDir)
    .sort()
    .flatMap((project) => {
      const manifest = JSON.parse(readFileSync(join(projectsDir, project, 'package.json'), 'utf8'))
      return runsOf(project).map((variant) => ({ project, manifest, variant }))
    })
  await twoAtATime(runs, ({ project, manifest, variant }) => runProject(project, manifest, variant))
} finally {
  redisServer?.child.kill()
}

async function runProject(project, manifest, variant) {
  const label = variant.name ? `${project} with ${variant.name}` : project
  say(`\n${label} (${manifest.description})`)
  const dir = join(scratch, variant.name ? `${project}-${variant.name.replace(/[^A-Za-z0-9.-]/g, '-')}` : project)
  cpSync(join(projectsDir, project), dir, { recursive: true })
  rmSync(join(dir, 'variants.json'), { force: true })
  const pkgFile = join(dir, 'package.json')
  const pkg = JSON.parse(readFileSync(pkgFile, 'utf8'))
  for (const field of ['dependencies', 'devDependencies']) {
    pkg[field] = { ...pkg[field], ...variant[field] }
    for (const [dep, spec] of Object.entries(pkg[field])) {
      if (spec === 'tarball') {
        if (!tarballs[dep]) throw new Error(`${dep} was not packed`)
        pkg[field][dep] = `file:${tarballs[dep]}`
      } else if (spec === 'monorepo') pkg[field][dep] = monorepoVersion(dep)
    }
  }
  writeFileSync(pkgFile, `${JSON.stringify(pkg, null, 2)}\n`)
  const t0 = Date.now()
  const install = await runAsync(npm, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error'], {
    cwd: dir,
  })
  if (install.status !== 0) {
    fail(`npm install\n${indent(install.out)}`)
    return
  }
  ok(
    `npm install (${((Date.now() - t0) / 1000).toFixed(1)} s): ${Object.entries({ ...pkg.dependencies, ...pkg.devDependencies })
      .map(([d, s]) => `${d}@${s.startsWith('file:') ? 'tarball' : s}`)
      .join(', ')}`,
  )
  if (existsSync(join(dir, 'tsconfig.json'))) {
    const tsc = await runAsync(process.execPath, [join(dir, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], {
      cwd: dir,
    })
    const opts = JSON.parse(readFileSync(join(dir, 'tsconfig.json'), 'utf8')).compilerOptions
    const tscVersion = JSON.parse(readFileSync(join(dir, 'node_modules', 'typescript', 'package.json'), 'utf8')).version
    const what = `tsc ${tscVersion} (module ${opts.module}, moduleResolution ${opts.moduleResolution}, strict, skipLibCheck ${opts.skipLibCheck})`
    if (tsc.status !== 0) {
      fail(`${what}\n${indent(tsc.out)}`)
      return
    }
    ok(what)
  }
  if (TESTS[project]) {
    await runTests(dir, project)
    return
  }
  const env = { ...variant.env, ...(project === 'redis-client' ? { REDIS_URL: await redisUrl() } : {}) }
  let server
  try {
    server = await spawnServer(dir, ENTRY[project], env)
    ok(`node ${ENTRY[project]}: listening on 127.0.0.1:${server.port}`)
    await exercise(server.port, project)
  } catch (error) {
    fail(`${label}: ${error.message}${server ? `\n${indent(server.output())}` : ''}`)
  } finally {
    server?.child.kill()
  }
}

console.log('')
if (failures.length) {
  console.log(`external suite: ${failures.length} check(s) failed; the scratch projects are kept in ${scratch}`)
  process.exit(1)
}
if (args.has('--keep')) console.log(`external suite: all checks passed; scratch projects kept in ${scratch}`)
else {
  rmSync(scratch, { recursive: true, force: true })
  console.log('external suite: all checks passed')
}
