import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const root = join(__dirname, '..', '..')
const FIXTURES = join(root, 'test', 'nestjs', 'fixtures')
const CACHE_PREFIX = 'nestjs-fixtures-'

/** Every .ts file under `dir`, sorted, with `tsconfig.json` where there is one. */
function sources(dir: string): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'dist' ? [] : sources(path)
      return entry.name.endsWith('.ts') || entry.name === 'tsconfig.json' ? [path] : []
    })
    .sort()
}

/** A digest of what the compiled fixtures are made from: the fixtures, and the packages' sources they import. */
function digest(): string {
  const hash = createHash('sha256')
  const packages = join(root, 'packages')
  const files = [...sources(FIXTURES), ...readdirSync(packages).flatMap((name) => sources(join(packages, name, 'src')))]
  for (const file of files) hash.update(file).update('\0').update(readFileSync(file)).update('\0')
  return hash.digest('hex').slice(0, 16)
}

/**
 * Compiles the Nest fixtures (test/nestjs/fixtures) as a Nest user does: the real tsc, type-checked, with
 * experimentalDecorators and emitDecoratorMetadata (ts-jest here uses standard decorators, which Nest
 * cannot use). The output lives under the repository's .tmp/ so its requires resolve in node_modules;
 * jest maps @tollgate/* to the sources as for every test. Returns the compiled fixtures' directory and a cleanup.
 *
 * The several suites that use them share one compilation, kept in .tmp/ under a digest of what it was made
 * from, until the fixtures or the packages' sources change: it is made in a folder of its own, then renamed
 * into place, so a suite finds it whole or not at all. Making a new one removes the older ones.
 */
export function compileFixtures(): { dir: string; remove: () => void } {
  const tmp = join(root, '.tmp')
  mkdirSync(tmp, { recursive: true })
  const cached = join(tmp, `${CACHE_PREFIX}${digest()}`)
  const dir = join(cached, 'test', 'nestjs', 'fixtures')
  const shared = { dir, remove: () => {} }
  if (existsSync(join(cached, '.complete'))) return shared
  const out = mkdtempSync(join(tmp, 'nestjs-compiling-'))
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  try {
    execFileSync(process.execPath, [tsc, '-p', join(FIXTURES, 'tsconfig.json'), '--outDir', out], {
      cwd: root,
      encoding: 'utf8',
      timeout: 120_000,
    })
  } catch (error) {
    rmSync(out, { recursive: true, force: true })
    const e = error as { stdout?: string; stderr?: string }
    throw new Error(`tsc failed on test/nestjs/fixtures:\n${e.stdout ?? ''}${e.stderr ?? ''}`)
  }
  writeFileSync(join(out, '.complete'), '')
  for (const entry of readdirSync(tmp))
    if (entry.startsWith(CACHE_PREFIX) && join(tmp, entry) !== cached) rmSync(join(tmp, entry), { recursive: true, force: true })
  try {
    renameSync(out, cached)
  } catch {
    // Another run put the same compilation in place first: it is used, and this one dropped.
    rmSync(out, { recursive: true, force: true })
  }
  return shared
}
