// Where a benchmark writes its results. Only `npm run bench`'s full run writes into the tree: bench/RESULTS.md,
// its JSON and its charts, the one results page, rewritten by every run. Every other run (a --quick check, a
// focused --out, the other benchmarks) writes under bench/out/, which git ignores, so an experiment leaves no
// file to commit; its figures go into a commit message or the changelog if they matter.
import { mkdirSync } from 'node:fs'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const BENCH_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..')
export const OUT_DIR = join(BENCH_DIR, 'out')

/**
 * The base path (no extension) of a result named on the command line: a bare name lands in bench/out/, a path
 * (absolute, or with a directory in it) is taken from the current directory. The directory is created.
 */
export function outBase(name) {
  const base = isAbsolute(name) || /[\\/]/.test(name) ? resolve(name) : join(OUT_DIR, name)
  mkdirSync(dirname(base), { recursive: true })
  return base
}

/** The --out line of a benchmark's help. */
export const outHelp = (dflt, files = 'NAME.md and NAME.json') =>
  `--out NAME: writes ${files} in bench/out/ (default ${dflt}), which git ignores; a path (with a /) is used as given`
