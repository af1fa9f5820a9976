// Renders the results page of a finished HTTP benchmark run from its JSON, without running the bench again:
//
//   node scripts/bench-charts.mjs [bench/RESULTS.json]
//
// writes RESULTS.md and RESULTS-<framework>.svg beside it (what `npm run bench` writes), so a change to the report
// or the charts reaches the page without a new run, and the page stays what the code renders, never hand-edited.
import { writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { basename, dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { renderCharts } from '../bench/lib/chart.mjs'
import { renderMarkdown } from '../bench/lib/report.mjs'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const file = resolve(process.argv[2] ?? join(root, 'bench', 'RESULTS.json'))
const report = JSON.parse(await readFile(file, 'utf8'))
const name = basename(file, '.json')
// The page's links to its charts follow the file's name, whatever --out the run was given.
const md = renderMarkdown({ ...report, config: { ...report.config, out: name } })
const page = join(dirname(file), `${name}.md`)
writeFileSync(page, md)
console.log(`wrote ${relative(process.cwd(), page)} (${md.length} bytes)`)
for (const chart of renderCharts(report, name)) {
  const path = join(dirname(file), chart.file)
  writeFileSync(path, chart.svg)
  console.log(`wrote ${relative(process.cwd(), path)} (${chart.framework}, ${chart.svg.length} bytes)`)
}
