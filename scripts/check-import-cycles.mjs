#!/usr/bin/env node
// Fails when the relative imports of packages/*/src form a cycle (STYLE.md §18: "no import cycles").
// `import type` counts as an edge: a type-only cycle still means a declaration sits in the wrong file.
// Only static `import`/`export ... from` statements are read; `import('./x')` is left out, since a lazy
// import is the usual way to break a load-time cycle on purpose.
//
// Exit codes: 0 no cycle; 1 a cycle (each printed as a → b → a); 2 a relative import that resolves to no
// .ts file under packages/*/src, since a graph with missing edges cannot vouch for the absence of cycles.
//
// Usage: node scripts/check-import-cycles.mjs [repo root, default: this script's parent directory]
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..'))
const MAX_CYCLES = 100

/** Every .ts file under packages/<name>/src, as absolute paths. */
function sourceFiles() {
  const packages = join(root, 'packages')
  const files = []
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && entry.name !== 'dist') walk(path)
      } else if (entry.isFile() && entry.name.endsWith('.ts')) files.push(path)
    }
  }
  if (!existsSync(packages)) return files
  for (const entry of readdirSync(packages, { withFileTypes: true })) {
    const src = join(packages, entry.name, 'src')
    if (entry.isDirectory() && existsSync(src) && statSync(src).isDirectory()) walk(src)
  }
  return files.sort()
}

/**
 * The source with comments and the contents of strings, templates and regex literals blanked out
 * (same length, newlines kept), so an import quoted in a JSDoc example or a string is not read as one;
 * `strings` maps the offset of each string's opening quote to its text, for reading specifiers back.
 * A regex literal is told from a division by the usual heuristic: it starts where an expression cannot end.
 */
function blankOut(code) {
  const strings = new Map()
  let out = ''
  let i = 0
  const braces = [] // one entry per open `${` of a template: the depth of `{` inside it
  const blank = (text) => text.replace(/[^\n]/g, ' ')
  const canStartRegex = () => {
    let end = out.length
    while (end > 0 && /\s/.test(out[end - 1])) end--
    if (end === 0) return true
    const before = out.slice(Math.max(0, end - 16), end)
    if (/[(,=:[!&|?{};+\-*%<>~^]$/.test(before)) return true
    return /(?:^|[^\w$.])(?:return|typeof|instanceof|in|of|new|delete|void|throw|case|do|else|yield|await)$/.test(before)
  }
  const skipString = (quote) => {
    let j = i + 1
    while (j < code.length && code[j] !== quote && code[j] !== '\n') j += code[j] === '\\' ? 2 : 1
    strings.set(out.length, code.slice(i + 1, j))
    out += quote + blank(code.slice(i + 1, j)) + (j < code.length ? code[j] : '')
    i = j + 1
  }
  // From inside a template literal to its end or to a `${`.
  const skipTemplate = () => {
    let j = i
    while (j < code.length && code[j] !== '`' && !(code[j] === '$' && code[j + 1] === '{')) j += code[j] === '\\' ? 2 : 1
    if (code[j] === '`') {
      out += `${blank(code.slice(i, j))}\``
      i = j + 1
    } else {
      out += `${blank(code.slice(i, j))}\${`
      i = j + 2
      braces.push(0)
    }
  }
  while (i < code.length) {
    const c = code[i]
    const next = code[i + 1]
    if (c === '/' && next === '/') {
      const end = code.indexOf('\n', i)
      const stop = end === -1 ? code.length : end
      out += blank(code.slice(i, stop))
      i = stop
    } else if (c === '/' && next === '*') {
      const end = code.indexOf('*/', i + 2)
      const stop = end === -1 ? code.length : end + 2
      out += blank(code.slice(i, stop))
      i = stop
    } else if (c === '"' || c === "'") {
      skipString(c)
    } else if (c === '`') {
      out += c
      i++
      skipTemplate()
    } else if (c === '{' && braces.length > 0) {
      braces[braces.length - 1]++
      out += c
      i++
    } else if (c === '}' && braces.length > 0 && braces[braces.length - 1] === 0) {
      braces.pop()
      out += c
      i++
      skipTemplate()
    } else if (c === '}' && braces.length > 0) {
      braces[braces.length - 1]--
      out += c
      i++
    } else if (c === '/' && canStartRegex()) {
      let j = i + 1
      let inClass = false
      while (j < code.length && code[j] !== '\n' && (inClass || code[j] !== '/')) {
        if (code[j] === '\\') j++
        else if (code[j] === '[') inClass = true
        else if (code[j] === ']') inClass = false
        j++
      }
      out += `/${blank(code.slice(i + 1, j))}${j < code.length ? code[j] : ''}`
      i = j + 1
    } else {
      out += c
      i++
    }
  }
  return { text: out, strings }
}

// `import x from`, `import { a, type B } from`, `import type { A } from`, `import * as n from`,
// `export { a } from`, `export type { A } from`, `export * from`, `export * as n from`; then `import './x'`.
const FROM = /(?<![\w$.])(import|export)(\s+type(?=[\s{*]))?\s*([\w$*{}\s,]*?)\s*\bfrom\s*(['"])/dg
const BARE = /(?<![\w$.])import\s*(['"])/dg

/** The relative imports of one file: [{ specifier, typeOnly }]. */
function importsOf(code) {
  const found = []
  const { text, strings } = blankOut(code)
  for (const m of text.matchAll(FROM)) {
    const [, , typeKeyword, clause] = m
    const specifier = strings.get(m.indices[4][0])
    // `import { type A, type B } from` imports nothing at run time either; `import type from` is a
    // default import named "type".
    const names = clause
      .replace(/[{}]/g, ' ')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
    const typeOnly =
      (typeKeyword !== undefined && clause !== '') || (clause.includes('{') && names.length > 0 && names.every((n) => /^type\s/.test(n)))
    found.push({ specifier, typeOnly })
  }
  for (const m of text.matchAll(BARE)) found.push({ specifier: strings.get(m.indices[1][0]), typeOnly: false })
  return found.filter((f) => f.specifier?.startsWith('./') || f.specifier?.startsWith('../'))
}

/** './x' → x.ts or x/index.ts (also './x.js' → x.ts, the ESM spelling of a TS import). */
function resolveImport(from, specifier, known) {
  const base = resolve(dirname(from), specifier)
  const candidates = [base, `${base}.ts`, join(base, 'index.ts')]
  if (/\.[cm]?js$/.test(base)) candidates.push(base.replace(/\.([cm]?)js$/, '.$1ts'))
  return candidates.find((c) => known.has(c))
}

const rel = (file) => relative(root, file).split('\\').join('/')

const files = sourceFiles()
const known = new Set(files)
/** file → Map(target → typeOnly), typeOnly only when every import of target from file is type-only. */
const graph = new Map()
const unresolved = []
for (const file of files) {
  const edges = new Map()
  for (const { specifier, typeOnly } of importsOf(readFileSync(file, 'utf8'))) {
    const target = resolveImport(file, specifier, known)
    if (target === undefined) {
      unresolved.push(`${rel(file)} imports "${specifier}"`)
      continue
    }
    edges.set(target, (edges.get(target) ?? true) && typeOnly)
  }
  graph.set(file, edges)
}

// Tarjan's strongly connected components: every cycle lies inside one.
function components() {
  const index = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const result = []
  let counter = 0
  const visit = (v) => {
    index.set(v, counter)
    low.set(v, counter)
    counter++
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v).keys()) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v), low.get(w)))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)))
    }
    if (low.get(v) === index.get(v)) {
      const component = []
      let w
      do {
        w = stack.pop()
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      result.push(component)
    }
  }
  for (const file of files) if (!index.has(file)) visit(file)
  return result
}

/** The elementary cycles of one component, each starting at its first file in sorted order. */
function cyclesIn(component, limit) {
  const order = [...component].sort()
  const rank = new Map(order.map((f, i) => [f, i]))
  const cycles = []
  for (const start of order) {
    const path = [start]
    const onPath = new Set(path)
    const walk = (v) => {
      for (const w of [...graph.get(v).keys()].sort()) {
        if (cycles.length >= limit) return
        if (!rank.has(w) || rank.get(w) < rank.get(start)) continue
        if (w === start) cycles.push([...path, start])
        else if (!onPath.has(w)) {
          path.push(w)
          onPath.add(w)
          walk(w)
          path.pop()
          onPath.delete(w)
        }
      }
    }
    walk(start)
  }
  return cycles
}

const cycles = []
for (const component of components()) {
  const only = component[0]
  if (component.length === 1 && !graph.get(only).has(only)) continue
  cycles.push(...cyclesIn(component, MAX_CYCLES + 1 - cycles.length))
  if (cycles.length > MAX_CYCLES) break
}

if (unresolved.length > 0) {
  console.error(`${unresolved.length} relative import(s) resolve to no .ts file under packages/*/src (tried x.ts, x/index.ts):`)
  for (const line of unresolved) console.error(`  ${line}`)
}
if (cycles.length === 0) {
  if (unresolved.length === 0) console.log(`no import cycles in ${files.length} files`)
  else {
    console.error(`no import cycle among the imports that resolve, in ${files.length} files; fix the imports above to check them all`)
    process.exitCode = 2
  }
} else {
  const shown = cycles.slice(0, MAX_CYCLES)
  console.error(`${shown.length}${cycles.length > MAX_CYCLES ? '+' : ''} import cycle(s) in ${files.length} files:`)
  for (const cycle of shown) {
    const typeOnly = cycle.slice(1).every((file, i) => graph.get(cycle[i]).get(file))
    console.error(`  ${cycle.map(rel).join(' → ')}${typeOnly ? '  (type-only: every import in it is `import type`)' : ''}`)
  }
  process.exitCode = 1
}
