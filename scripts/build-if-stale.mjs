#!/usr/bin/env node
// `npm test` builds the packages first (some suites load the built files: the ESM/CJS entry checks, the
// docs and packaging tests), but only when a package's build is missing or older than what it is built
// from (its src/, package.json, tsconfig.json): CI builds once, before its first tier, and the later tiers
// reuse that build instead of making it again.
//
//   node scripts/build-if-stale.mjs          build when stale, else say why not
//   node scripts/build-if-stale.mjs --force  build
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(fileURLToPath(import.meta.url), '..', '..')
const PACKAGES = ['core', 'express', 'fastify', 'koa', 'nestjs', 'upstash', 'cloudflare', 'web', 'hono']

/** The newest modification time under `path` (a file, or every file of a directory tree). */
function newest(path) {
  if (!existsSync(path)) return 0
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  let latest = 0
  for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)))
  return latest
}

/** The oldest modification time of a directory's files (0 when it has none). */
function oldest(path) {
  if (!existsSync(path)) return 0
  let first = Number.POSITIVE_INFINITY
  for (const entry of readdirSync(path)) {
    const p = join(path, entry)
    const stat = statSync(p)
    first = Math.min(first, stat.isDirectory() ? oldest(p) : stat.mtimeMs)
  }
  return Number.isFinite(first) ? first : 0
}

function stale() {
  for (const name of PACKAGES) {
    const dir = join(root, 'packages', name)
    const built = oldest(join(dir, 'dist'))
    if (built === 0) return `packages/${name} has no build`
    const source = Math.max(newest(join(dir, 'src')), newest(join(dir, 'package.json')), newest(join(dir, 'tsconfig.json')))
    if (source > built) return `packages/${name}/src changed since its build`
  }
  return undefined
}

const why = process.argv.includes('--force') ? 'asked to' : stale()
if (why === undefined) {
  console.log('build-if-stale: every package is built from its current sources; not building again')
  process.exit(0)
}
console.log(`build-if-stale: building (${why})`)
const r = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build'], { cwd: root, stdio: 'inherit' })
process.exit(r.status ?? 1)
