import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { basename, join, resolve } from 'node:path'
import ts from 'typescript'

/*
 * Compiles decorator fixtures with the real TypeScript compiler, type-checker included, in one of its
 * two decorator modes: `legacy` is experimentalDecorators + emitDecoratorMetadata, as NestJS
 * and routing-controllers projects set it; `standard` is TypeScript 5's TC39 decorators. The output is
 * CommonJS in .tmp/ under the repository, so the fixtures resolve node_modules as an app would (and
 * under jest, @tollgate/* map to the package sources as for every test).
 */

export type DecoratorMode = 'legacy' | 'standard'

const root = resolve(__dirname, '..', '..')
export const fixture = (name: string) => join(__dirname, 'fixtures', name)

function compilerOptions(mode: DecoratorMode): ts.CompilerOptions {
  return {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    strict: true,
    esModuleInterop: true,
    skipLibCheck: true,
    types: ['node'],
    baseUrl: root,
    // The packages resolve to their sources, as in the repository's tsconfig.
    paths: ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile).config.compilerOptions.paths,
    ...(mode === 'legacy' ? { experimentalDecorators: true, emitDecoratorMetadata: true } : {}),
  }
}

/** Every diagnostic tsc reports on `files` in `mode`, one line each ("file(line,col): TSxxxx message"). */
function typeErrors(files: string[], mode: DecoratorMode): { program: ts.Program; errors: string[] } {
  const program = ts.createProgram(files, compilerOptions(mode))
  const errors = ts.getPreEmitDiagnostics(program).map((d) => {
    const text = ts.flattenDiagnosticMessageText(d.messageText, '\n')
    if (d.file === undefined || d.start === undefined) return `TS${d.code} ${text}`
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start)
    return `${basename(d.file.fileName)}(${line + 1},${character + 1}): TS${d.code} ${text}`
  })
  return { program, errors }
}

/**
 * Type-checks `files` and emits each of them (not the package sources they import) as
 * .tmp/decorators/<label>-<mode>/<name>.js (a folder per test file: jest runs files in parallel).
 * Returns that folder and tsc's diagnostics, which a test asserts empty.
 */
export function compileFixtures(files: string[], mode: DecoratorMode, label: string): { outDir: string; errors: string[] } {
  const { program, errors } = typeErrors(files, mode)
  const outDir = join(root, '.tmp', 'decorators', `${label}-${mode}`)
  rmSync(outDir, { recursive: true, force: true })
  mkdirSync(outDir, { recursive: true })
  for (const file of files) {
    const source = program.getSourceFile(file)
    if (source === undefined) throw new Error(`tsc did not read ${file}`)
    const result = program.emit(source, (name, text) => {
      if (name.endsWith('.js')) writeFileSync(join(outDir, basename(name)), text)
    })
    if (result.emitSkipped) throw new Error(`tsc emitted nothing for ${file}`)
  }
  return { outDir, errors }
}
