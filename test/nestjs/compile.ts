import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'

const root = join(__dirname, '..', '..')

/**
 * Compiles the Nest fixtures (test/nestjs/fixtures) as a Nest user does: the real tsc, type-checked, with
 * experimentalDecorators and emitDecoratorMetadata (ts-jest here uses standard decorators, which Nest
 * cannot use). The output lives under the repository's .tmp/ so its requires resolve in node_modules;
 * jest maps @tollgate/* to the sources as for every test. Returns the compiled fixtures' directory and a cleanup.
 */
export function compileFixtures(): { dir: string; remove: () => void } {
  mkdirSync(join(root, '.tmp'), { recursive: true })
  const out = mkdtempSync(join(root, '.tmp', 'nestjs-fixtures-'))
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  try {
    execFileSync(process.execPath, [tsc, '-p', join(root, 'test', 'nestjs', 'fixtures', 'tsconfig.json'), '--outDir', out], {
      cwd: root,
      encoding: 'utf8',
      timeout: 120_000,
    })
  } catch (error) {
    rmSync(out, { recursive: true, force: true })
    const e = error as { stdout?: string; stderr?: string }
    throw new Error(`tsc failed on test/nestjs/fixtures:\n${e.stdout ?? ''}${e.stderr ?? ''}`)
  }
  return { dir: join(out, 'test', 'nestjs', 'fixtures'), remove: () => rmSync(out, { recursive: true, force: true }) }
}
