import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import ts from 'typescript'

// The reference pages against the TypeScript types, read with the compiler API from packages/core/src (never
// from a hand-kept list): every option of LimiterOptions, MemoryStoreOptions and RedisStoreOptions has a table
// row with a type and a default that agrees with its JSDoc @default; every public member of the Limiter class
// has an entry; every field of Decision and every TollgateErrorCode is in its table.

const ROOT = join(__dirname, '..', '..')
const CORE = join(ROOT, 'packages', 'core', 'src')
const page = (name: string) => readFileSync(join(ROOT, 'docs', 'reference', name), 'utf8')

const program = ts.createProgram([join(CORE, 'index.ts')], {
  strict: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  skipLibCheck: true,
  noEmit: true,
})
const checker = program.getTypeChecker()
const entry = program.getSourceFile(join(CORE, 'index.ts'))!
const exported = new Map(checker.getExportsOfModule(checker.getSymbolAtLocation(entry)!).map((s) => [s.name, s]))

/** The symbol `name` exported by @tollgate/core, through its re-exports. */
function coreExport(name: string): ts.Symbol {
  const symbol = exported.get(name)
  if (symbol === undefined) throw new Error(`@tollgate/core exports no ${name}`)
  return symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol
}

interface Member {
  name: string
  /** The JSDoc `@default`, as written, when there is one. */
  default?: string
}

/** The properties of an exported interface, inherited ones included, with their @default. */
function propertiesOf(name: string): Member[] {
  const type = checker.getDeclaredTypeOfSymbol(coreExport(name))
  return checker.getPropertiesOfType(type).map((p) => {
    const tag = p.getJsDocTags(checker).find((t) => t.name === 'default')
    return { name: p.name, default: tag?.text?.map((t) => t.text).join('') }
  })
}

/** The public members an exported class declares itself (methods, accessors, properties), not what it inherits. */
function publicMembersOf(name: string): string[] {
  const found = coreExport(name).valueDeclaration
  if (found === undefined || !ts.isClassDeclaration(found)) throw new Error(`${name} is not a class`)
  let declaration: ts.ClassDeclaration = found
  // A class that only registers what its base needs (the Limiter of @tollgate/core): the base's members.
  while (declaration.members.length === 0 && declaration.heritageClauses?.[0]?.types[0] !== undefined) {
    let base = checker.getSymbolAtLocation(declaration.heritageClauses[0].types[0].expression)
    if (base !== undefined && base.flags & ts.SymbolFlags.Alias) base = checker.getAliasedSymbol(base)
    const next = base?.valueDeclaration
    if (next === undefined || !ts.isClassDeclaration(next)) break
    declaration = next
  }
  return declaration.members
    .filter((m) => !ts.isConstructorDeclaration(m) && m.name !== undefined && !ts.isPrivateIdentifier(m.name))
    .filter((m) => !(ts.getCombinedModifierFlags(m) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)))
    .map((m) => m.name!.getText())
    .filter((n, i, all) => all.indexOf(n) === i)
}

/** The members of a union of string literal types, e.g. TollgateErrorCode. */
function literalsOf(name: string): string[] {
  const type = checker.getDeclaredTypeOfSymbol(coreExport(name))
  return (type.isUnion() ? type.types : [type]).filter((t) => t.isStringLiteral()).map((t) => (t as ts.StringLiteralType).value)
}

/** The rows of every Markdown table in `markdown` (or in its section under `heading`), keyed by the first cell's `code`. */
function rows(markdown: string, heading?: string): Map<string, string[]> {
  let text = markdown
  if (heading !== undefined) {
    const start = markdown.indexOf(`\n${heading}\n`)
    if (start < 0) throw new Error(`no section "${heading}"`)
    const next = markdown.slice(start + heading.length + 2).search(/^#{1,2} /m)
    text = markdown.slice(start, next < 0 ? undefined : start + heading.length + 2 + next)
  }
  const found = new Map<string, string[]>()
  for (const line of text.split('\n')) {
    if (!line.startsWith('| `')) continue
    // Cells split on the pipes that are not escaped (`\|` inside a type).
    const cells = line
      .slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((c) => c.trim())
    const name = /^`([^`]+)`$/.exec(cells[0]!)?.[1]
    if (name !== undefined) found.set(name, cells)
  }
  return found
}

/** A default as the docs and the JSDoc write it, compared without backticks and without an ", e.g." example. */
const plain = (text: string) => text.replace(/`/g, '').split(', e.g.')[0]!.trim()

describe.each([
  ['LimiterOptions', 'options.md', '## Limiter options'],
  ['MemoryStoreOptions', 'stores.md', '## MemoryStore'],
  ['RedisStoreOptions', 'stores.md', '## RedisStore'],
])('%s', (type, file, heading) => {
  const members = propertiesOf(type)
  const table = rows(page(file), heading)

  it(`has a row in docs/reference/${file} for every option`, () => {
    expect(members.length).toBeGreaterThan(3)
    expect(members.map((m) => m.name).filter((name) => !table.has(name))).toEqual([])
  })

  it('gives each row a type, a default and a description, the default as the JSDoc @default says', () => {
    for (const member of members) {
      const cells = table.get(member.name)
      if (cells === undefined) continue // reported by the test above
      expect({ option: member.name, cells: cells.length }).toEqual({ option: member.name, cells: 4 })
      expect({ option: member.name, empty: cells.filter((c) => c === '') }).toEqual({ option: member.name, empty: [] })
      if (member.default !== undefined)
        expect({ option: member.name, default: plain(cells[2]!) }).toEqual({
          option: member.name,
          default: expect.stringContaining(plain(member.default)),
        })
    }
  })
})

describe('Limiter', () => {
  const members = publicMembersOf('Limiter')
  const markdown = page('limiter.md')

  it('has an entry in docs/reference/limiter.md for every public method, accessor and property', () => {
    expect(members).toEqual(expect.arrayContaining(['check', 'consume', 'peek', 'reset', 'refund']))
    const documented = (name: string) => new RegExp(`^#{2,4} \`limiter\\.${name}\\b`, 'm').test(markdown)
    expect(members.filter((name) => !documented(name))).toEqual([])
  })
})

it('documents every field of Decision in docs/reference/options.md', () => {
  const table = rows(page('options.md'), '## The decision')
  expect(
    propertiesOf('Decision')
      .map((m) => m.name)
      .filter((name) => !table.has(name)),
  ).toEqual([])
})

it('documents every TollgateErrorCode in docs/reference/errors.md', () => {
  const codes = literalsOf('TollgateErrorCode')
  expect(codes).toContain('TG_INVALID_OPTION')
  const table = rows(page('errors.md'))
  expect(codes.filter((code) => !table.has(code))).toEqual([])
})
