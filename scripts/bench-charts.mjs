// Renders the SVG charts of a finished HTTP benchmark run from its JSON, without running the bench again:
//
//   node scripts/bench-charts.mjs [bench/RESULTS-latest.json]
//
// writes bench/RESULTS-latest-<framework>.svg beside it (the names `npm run bench` gives them).
import { writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { basename, dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { renderCharts } from '../bench/lib/chart.mjs'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const file = resolve(process.argv[2] ?? join(root, 'bench', 'RESULTS-latest.json'))
const report = JSON.parse(await readFile(file, 'utf8'))
for (const chart of renderCharts(report, basename(file, '.json'))) {
  const path = join(dirname(file), chart.file)
  writeFileSync(path, chart.svg)
  console.log(`wrote ${relative(process.cwd(), path)} (${chart.framework}, ${chart.svg.length} bytes)`)
}
