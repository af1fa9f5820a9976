// Tollgate built from another tree: the "before" of a before/after run (`--baseline DIR`).
//
// DIR is a checkout of Tollgate with its own `npm ci` and `npm run build`. Its packages are
// resolved the way Node resolves them from DIR (DIR/node_modules/@tollgate/<name>, a workspace link
// to DIR/packages/<name>), and the ESM build is imported by absolute URL. The adapter then imports
// `@tollgate/core` itself, from its own location, so it gets DIR's core, not the current tree's.
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, realpathSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve, sep } from 'node:path'
import { pathToFileURL } from 'node:url'

/** Suffix of the case ids (and store variants) that run the baseline's Tollgate. */
export const BASE_SUFFIX = '@base'

/** The directory of package `name` as Node resolves it from `fromDir` (symlinks followed). */
export function packageDir(name, fromDir) {
  try {
    return dirname(createRequire(join(fromDir, 'bench-resolve.js')).resolve(`${name}/package.json`))
  } catch {}
  // A package that does not export ./package.json: look through node_modules upwards ourselves.
  for (let d = fromDir; ; d = dirname(d)) {
    const p = join(d, 'node_modules', name, 'package.json')
    if (existsSync(p)) return realpathSync(dirname(p))
    if (dirname(d) === d) break
  }
  throw Object.assign(new Error(`cannot find ${name} from ${fromDir}`), { code: 'ERR_MODULE_NOT_FOUND' })
}

/** The file `import(name)` loads from a package directory: exports["."] import/default, else module, else main. */
export function esmEntry(dir) {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  let e = pkg.exports
  if (e && typeof e === 'object' && !Array.isArray(e) && '.' in e) e = e['.']
  const pick = (x) => (typeof x === 'string' ? x : x && typeof x === 'object' ? pick(x.import ?? x.node ?? x.default) : undefined)
  return join(dir, pick(e) ?? pkg.module ?? pkg.main ?? 'index.js')
}

/**
 * Import package `name` (e.g. `@tollgate/fastify`) as resolved from `fromDir`. Returns the module,
 * its directory, and the directory of the `@tollgate/core` that package itself resolves.
 */
export async function importFrom(name, fromDir) {
  const dir = packageDir(name, resolve(fromDir))
  const mod = await import(pathToFileURL(esmEntry(dir)).href)
  let coreDir = null
  try {
    coreDir = name === '@tollgate/core' ? dir : packageDir('@tollgate/core', dir)
  } catch {}
  const version = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version ?? null
  return { mod, dir, coreDir, version }
}

/** Whether `path` is `dir` or inside it (both real paths). */
export function inside(path, dir) {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep)
}

/**
 * Which tree a directory is: its real path, git commit (short) and whether its Tollgate sources
 * (packages/, or the whole tree if it has none) differ from that commit.
 */
export function describeTree(dir) {
  const real = realpathSync(dir)
  const git = (...args) =>
    execFileSync('git', ['-C', real, ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, GIT_OPTIONAL_LOCKS: '0' }, // read only: never take the index lock
    }).trim()
  let commit = null
  let dirty = null
  try {
    commit = git('rev-parse', '--short', 'HEAD')
    const scope = existsSync(join(real, 'packages')) ? ['--', 'packages'] : []
    dirty = git('status', '--porcelain', ...scope).length > 0
  } catch {}
  const where = existsSync(join(real, 'packages')) ? ' in packages/' : ''
  const text = `${real}${commit ? ` at ${commit}${dirty ? ` + uncommitted changes${where}` : ''}` : ''}`
  return { dir: real, commit, dirty, text }
}
