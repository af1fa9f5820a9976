// Type-checks every ```ts block of the READMEs and of the docs site (docs/**/*.md) under strict TypeScript: a snippet a reader
// copies must compile. Each block becomes a module of its own in .tmp/snippets/; the names snippets use
// without declaring them (the app, a login handler...) are declared once in PRELUDE below. The packages
// resolve to their sources, as in the root tsconfig, so no build is needed.
//
// A block opened with ```ts legacy-decorators is checked as NestJS code is compiled: experimentalDecorators
// and emitDecoratorMetadata (in .tmp/snippets/legacy/, with the same prelude and paths).
//
//   node scripts/check-snippets.mjs [file.md ...]   (default: README.md, packages/*/README.md and docs/**/*.md)
//
// Errors are reported at their line in the Markdown file; the exit status is 1 when there is one.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const outDir = join(root, '.tmp', 'snippets')

// What the app around a snippet would have declared. One prelude for every snippet: a snippet that
// needs another name should declare it itself, or it is added here for all.
const PRELUDE = `// Names README snippets use without declaring them (scripts/check-snippets.mjs).
declare const app: import('express').Express
declare const rateLimit: typeof import('@tollgate/express').rateLimit
/** A handler that fits a route of each framework. */
declare const login: import('express').RequestHandler & import('fastify').RouteHandlerMethod & import('@koa/router').Middleware
declare const health: import('fastify').RouteHandlerMethod
declare const redis: import('ioredis').Redis
declare const id: string
declare const cost: number
declare const metrics: { increment(name: string): void }

// Bun's and Deno's globals, as much of them as the runtime pages use, typed as bun-types and Deno's own
// declarations type them (neither can join this Node-typed program whole).
interface BunSocketAddress { address: string; port: number; family: 'IPv4' | 'IPv6' }
interface BunServer { readonly port: number; readonly url: URL; requestIP(request: Request): BunSocketAddress | null; stop(): Promise<void> }
declare const Bun: {
  readonly env: Record<string, string | undefined>
  serve(options: {
    port?: number
    hostname?: string
    reusePort?: boolean
    fetch(request: Request, server: BunServer): Response | Promise<Response>
  }): BunServer
}
interface DenoServeHandlerInfo { remoteAddr: { transport: 'tcp'; hostname: string; port: number }; completed: Promise<void> }
type DenoServeHandler = (request: Request, info: DenoServeHandlerInfo) => Response | Promise<Response>
interface DenoServeOptions { port?: number; hostname?: string; onListen?: (local: { hostname: string; port: number }) => void }
declare const Deno: {
  readonly env: { get(key: string): string | undefined }
  serve(handler: DenoServeHandler): { finished: Promise<void> }
  serve(options: DenoServeOptions, handler: DenoServeHandler): { finished: Promise<void> }
}
`

const TSCONFIG = {
  compilerOptions: {
    strict: true,
    noUncheckedIndexedAccess: true,
    target: 'ES2022',
    lib: ['ES2022'],
    module: 'ESNext',
    moduleResolution: 'Bundler',
    esModuleInterop: true,
    isolatedModules: true,
    skipLibCheck: true,
    noEmit: true,
    types: ['node'],
    baseUrl: '../..',
    paths: {
      '@tollgate/core': ['packages/core/src/index.ts'],
      '@tollgate/core/adapter': ['packages/core/src/adapter.ts'],
      '@tollgate/core/lean': ['packages/core/src/lean.ts'],
      '@tollgate/core/store': ['packages/core/src/store.ts'],
      '@tollgate/core/testing': ['packages/core/src/testing.ts'],
      '@tollgate/express': ['packages/express/src/index.ts'],
      '@tollgate/express/internal': ['packages/express/src/internal.ts'],
      '@tollgate/fastify': ['packages/fastify/src/index.ts'],
      '@tollgate/koa': ['packages/koa/src/index.ts'],
      '@tollgate/nestjs': ['packages/nestjs/src/index.ts'],
      '@tollgate/upstash': ['packages/upstash/src/index.ts'],
      '@tollgate/cloudflare': ['packages/cloudflare/src/index.ts'],
      '@tollgate/web': ['packages/web/src/index.ts'],
      '@tollgate/hono': ['packages/hono/src/index.ts'],
    },
  },
  include: ['*.ts'],
}

/** The ```ts blocks of a Markdown file: { code, line } with line the 1-based line of the block's first code line. */
function snippets(markdown) {
  const lines = markdown.split('\n')
  const found = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(ts|typescript)(?:\s+(legacy-decorators))?\s*$/.exec(lines[i])
    if (!open) continue
    const start = i + 1
    let end = start
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end])) end++
    if (end === lines.length) throw new Error(`unclosed \`\`\`${open[2]} block at line ${i + 1}`)
    found.push({ code: lines.slice(start, end).join('\n'), line: start + 1, legacy: open[3] !== undefined })
    i = end
  }
  return found
}

/** The Markdown pages of the docs site: node_modules, VitePress's own folder (cache, build) and generated includes left out. */
function docsPages(dir) {
  if (!existsSync(join(root, dir))) return []
  return readdirSync(join(root, dir), { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) return entry.name.startsWith('.') || entry.name === 'node_modules' ? [] : docsPages(path)
      // `_*.md` are generated includes (scripts/docs-performance.mjs), not pages.
      return entry.name.endsWith('.md') && !entry.name.startsWith('_') ? [path] : []
    })
}

const defaults = () => [
  'README.md',
  ...readdirSync(join(root, 'packages'))
    .map((p) => join('packages', p, 'README.md'))
    .filter((f) => existsSync(join(root, f))),
  ...docsPages('docs'),
]
const files = (process.argv.length > 2 ? process.argv.slice(2) : defaults()).map((f) => resolve(root, f))

rmSync(outDir, { recursive: true, force: true })
mkdirSync(outDir, { recursive: true })
writeFileSync(join(outDir, 'prelude.d.ts'), PRELUDE)
writeFileSync(join(outDir, 'tsconfig.json'), `${JSON.stringify(TSCONFIG, null, 2)}\n`)
const legacyDir = join(outDir, 'legacy')
mkdirSync(legacyDir)
const LEGACY = {
  extends: '../tsconfig.json',
  compilerOptions: { experimentalDecorators: true, emitDecoratorMetadata: true, baseUrl: '../../..' },
  include: ['*.ts', '../prelude.d.ts'],
}
writeFileSync(join(legacyDir, 'tsconfig.json'), `${JSON.stringify(LEGACY, null, 2)}\n`)

const origin = new Map() // snippet file name -> { md, line }
let count = 0
for (const md of files) {
  const near = relative(process.cwd(), md)
  const shown = near.startsWith('..') ? md : near
  for (const s of snippets(readFileSync(md, 'utf8'))) {
    const name = `${relative(root, md).replace(/[^A-Za-z0-9]+/g, '-')}-L${s.line}.ts`
    // `export {}` makes every snippet a module, so two snippets declaring `app` do not collide and the
    // prelude's globals can be shadowed by a snippet's own import.
    writeFileSync(join(s.legacy ? legacyDir : outDir, name), `${s.code}\nexport {}\n`)
    origin.set(name, { md: shown, line: s.line })
    count++
  }
}

const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const runs = [outDir, legacyDir].map((dir) =>
  spawnSync(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json'), '--pretty', 'false'], { cwd: dir, encoding: 'utf8' }),
)
const output = runs
  .map((run) => `${run.stdout}${run.stderr}`.trim())
  .join('\n')
  .trim()
if (runs.every((run) => run.status === 0)) {
  console.log(`check-snippets: ${count} TypeScript snippet(s) in ${files.length} file(s) type-check under strict`)
  process.exit(0)
}

// "name.ts(3,7): error TS7006: ..." -> "README.md:123:7: error TS7006: ..." (continuation lines kept as they are).
let errors = 0
for (const line of output.split('\n')) {
  const m = /^(?:.*[\\/])?([^\\/()]+\.ts)\((\d+),(\d+)\): (error|warning) (.*)$/.exec(line)
  const at = m && origin.get(m[1])
  if (m?.[4] === 'error') errors++
  if (at) console.error(`${at.md}:${at.line + Number(m[2]) - 1}:${m[3]}: ${m[4]} ${m[5]}`)
  else console.error(line)
}
console.error(`check-snippets: ${errors || 'tsc reported'} error(s) in ${count} snippet(s); each snippet is in ${relative(root, outDir)}/`)
process.exit(1)
