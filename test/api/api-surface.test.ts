import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import * as ts from 'typescript'

/*
 * The public surface of every package, entry point by entry point: each name an entry exports, as a
 * value (there at runtime) or a type (only in the .d.ts), compared with the list committed beside this
 * file (<package>[-<subpath>].txt). An export added or removed fails here until the list is updated in
 * the same commit, so the surface only changes on purpose:
 *
 *   UPDATE_API=1 npx jest test/api
 *
 * The entries are read from each package.json's `exports`, so a new subpath needs only its list.
 */
const root = join(__dirname, '..', '..')
const UPDATE = process.env.UPDATE_API === '1'

/** Names that are internals of core: no public entry may export them (tests import them from the source). */
const INTERNALS = ['VISITED', 'withVisitor', 'LIMIT_DEFINING_KEYS', 'MAX_BATCH_KEYS']

interface Entry {
  /** The import specifier, e.g. `@tollgate/core/adapter`. */
  name: string
  /** Its source file (the entry tsup builds `dist/<x>.js` from). */
  source: string
  /** The committed list. */
  list: string
}

function entries(): Entry[] {
  const found: Entry[] = []
  for (const dir of readdirSync(join(root, 'packages')).sort()) {
    const pkgFile = join(root, 'packages', dir, 'package.json')
    if (!existsSync(pkgFile)) continue
    const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { name: string; exports: Record<string, unknown> }
    for (const [subpath, target] of Object.entries(pkg.exports)) {
      if (subpath === './package.json') continue
      const built = JSON.stringify(target).match(/\.\/dist\/([\w/-]+)\.js"/)
      if (built === null) throw new Error(`${pkg.name} exports ${subpath} without a ./dist/<entry>.js target`)
      found.push({
        name: subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`,
        source: join(root, 'packages', dir, 'src', `${built[1]}.ts`),
        list: join(__dirname, `${dir}${subpath === '.' ? '' : `-${subpath.slice(2).replace(/\//g, '-')}`}.txt`),
      })
    }
  }
  return found
}

/** Every name each entry exports, types included, as the compiler sees it (through `export *` too). */
function compiledExports(list: Entry[]): Map<string, string[]> {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    { noEmit: true },
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'))
      },
    },
  )!
  const program = ts.createProgram(
    list.map((e) => e.source),
    config.options,
  )
  const checker = program.getTypeChecker()
  const names = new Map<string, string[]>()
  for (const entry of list) {
    const file = program.getSourceFile(entry.source)
    const symbol = file && checker.getSymbolAtLocation(file)
    if (symbol === undefined) throw new Error(`${entry.name}: ${entry.source} is not a module`)
    names.set(
      entry.name,
      checker.getExportsOfModule(symbol).map((s) => s.name),
    )
  }
  return names
}

/** `value <name>` / `type <name>` lines, sorted by name: the form of the committed lists. */
function surface(compiled: string[], runtime: string[]): string[] {
  const values = new Set(runtime)
  return [...compiled].sort().map((name) => `${values.has(name) ? 'value' : 'type '} ${name}`)
}

const ENTRIES = entries()
let compiled: Map<string, string[]>
beforeAll(() => {
  compiled = compiledExports(ENTRIES)
}, 120_000)

describe.each(ENTRIES.map((e) => [e.name, e] as const))('the public entry %s', (name, entry) => {
  it('exports exactly the names of its committed list', () => {
    const runtime = Object.keys(require(name))
    const names = compiled.get(name)!
    expect(runtime.filter((n) => !names.includes(n))).toEqual([]) // nothing at runtime that the types do not declare
    const actual = surface(names, runtime)
    const file = entry.list.slice(root.length + 1)
    if (UPDATE) writeFileSync(entry.list, `${actual.join('\n')}\n`)
    if (!existsSync(entry.list)) {
      throw new Error(`${name} has no committed list of exports: run UPDATE_API=1 npx jest test/api to write ${file}, and review it`)
    }
    const committed = readFileSync(entry.list, 'utf8').split('\n').filter(Boolean)
    const added = actual.filter((line) => !committed.includes(line))
    const removed = committed.filter((line) => !actual.includes(line))
    if (added.length + removed.length > 0) {
      throw new Error(
        [
          `the exports of ${name} differ from ${file}:`,
          ...added.map((line) => `  + ${line}`),
          ...removed.map((line) => `  - ${line}`),
          'If the change is meant, update the list (UPDATE_API=1 npx jest test/api) in the same commit and say why there.',
        ].join('\n'),
      )
    }
  })

  it('exports none of core’s internals', () => {
    expect(compiled.get(name)!.filter((n) => INTERNALS.includes(n))).toEqual([])
  })
})

it('keeps no list for an entry that no package exports any more', () => {
  const lists = new Set(ENTRIES.map((e) => e.list))
  expect(
    readdirSync(__dirname)
      .filter((f) => f.endsWith('.txt'))
      .map((f) => join(__dirname, f))
      .filter((f) => !lists.has(f)),
  ).toEqual([])
})
