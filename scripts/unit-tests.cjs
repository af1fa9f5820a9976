#!/usr/bin/env node
// Which test files `npm run test:unit` runs: every *.test.ts that does not import test/harness/, directly
// or through the test helpers it imports. test/harness/ holds what a test needs from outside its own
// process (redis-server and Cluster spawners, the shared server's clients, the built packages), so a file
// that reaches none of it runs on the sources alone, without a server and without a build. The rule reads
// imports, so a new test file is sorted by what it uses, with nothing to list or name by hand.
//
// Counted: `import ... from`, `export ... from`, `import('...')`, `require('...')` with a literal path.
// Not counted: `import type` and `export type`, which vanish when compiled.
//
// The suites of the timing folders (TIMING_DIRS) are left out whatever they import.
//
// Usage: node scripts/unit-tests.cjs [--redis]   prints the unit files (or the others, with the reason)
const { existsSync, readdirSync, readFileSync, statSync } = require('node:fs')
const { dirname, join, relative, resolve, sep } = require('node:path')
const ts = require('typescript')

const EXTENSIONS = ['', '.ts', '.mjs', '.js', '/index.ts']

/**
 * The folders of test/ whose suites measure time: they stop and kill servers and processes, hold requests to
 * deadlines, or load a service to its capacity. They run in `npm test`'s timing lane, one file at a time
 * (jest.config.js, scripts/test-lanes.mjs), and never in the unit tier, even those that need no server: beside
 * other work their bounds would measure the machine.
 */
const TIMING_DIRS = ['faults', 'multiprocess', 'cluster', 'overload']

/** The module specifiers `file` loads at run time. */
function runtimeImports(file) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false)
  const found = []
  const visit = (node) => {
    if (ts.isImportDeclaration(node)) {
      if (!node.importClause?.isTypeOnly) found.push(node.moduleSpecifier.text)
    } else if (ts.isExportDeclaration(node)) {
      if (node.moduleSpecifier !== undefined && !node.isTypeOnly) found.push(node.moduleSpecifier.text)
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression
      const loads = callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require')
      const [first] = node.arguments
      if (loads && first !== undefined && ts.isStringLiteralLike(first)) found.push(first.text)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

function resolveLocal(from, specifier) {
  const base = resolve(dirname(from), specifier)
  return EXTENSIONS.map((ext) => base + ext).find((path) => existsSync(path) && statSync(path).isFile())
}

/**
 * For each test file under `root`/test, the chain of imports that reaches test/harness/ (e.g.
 * ['test/support/decision-table.ts', 'test/harness/redis.ts']), or undefined when none does.
 */
function classify(root) {
  const testDir = join(root, 'test')
  const harness = join(testDir, 'harness') + sep
  const chains = new Map()
  const chainOf = (file, visiting) => {
    if (chains.has(file)) return chains.get(file)
    if (visiting.has(file)) return undefined // a cycle: the other path through it decides
    visiting.add(file)
    let chain
    for (const specifier of runtimeImports(file)) {
      if (!specifier.startsWith('.')) continue
      const target = resolveLocal(file, specifier)
      if (target === undefined || !target.startsWith(testDir + sep)) continue
      if (target.startsWith(harness)) chain = [relative(root, target)]
      else if (/\.tsx?$/.test(target)) {
        const rest = chainOf(target, visiting)
        if (rest !== undefined) chain = [relative(root, target), ...rest]
      }
      if (chain !== undefined) break
    }
    visiting.delete(file)
    chains.set(file, chain)
    return chain
  }
  const tests = []
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && entry.name !== 'fixtures') walk(path)
      } else if (entry.name.endsWith('.test.ts')) tests.push(path)
    }
  }
  walk(testDir)
  return tests.sort().map((file) => ({ file: relative(root, file), chain: chainOf(file, new Set()) }))
}

/** Whether `file` (relative to the root) is in a timing folder. */
const timing = (file) => TIMING_DIRS.some((dir) => file.startsWith(`test${sep}${dir}${sep}`))

/** The test files `npm run test:unit` runs, relative to `root`. */
function unitTestFiles(root) {
  return classify(root)
    .filter(({ file, chain }) => chain === undefined && !timing(file))
    .map(({ file }) => file)
}

module.exports = { unitTestFiles, classify, TIMING_DIRS }

if (require.main === module) {
  const root = resolve(__dirname, '..')
  const others = process.argv.includes('--redis')
  for (const { file, chain } of classify(root)) {
    if (others && chain !== undefined) console.log(`${file}  (imports ${chain.join(' → ')})`)
    else if (others && timing(file)) console.log(`${file}  (a timing suite)`)
    else if (!others && chain === undefined && !timing(file)) console.log(file)
  }
}
