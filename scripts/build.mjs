#!/usr/bin/env node
// `npm run build`: every package's tsup build. Core first, since the others' type declarations are built
// against its own; then the rest two at a time, one per core: each is a type check of its own more than
// anything, so two at once take about half as long as one after another. A failure stops the run with
// that package's output.
import { spawn } from 'node:child_process'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(fileURLToPath(import.meta.url), '..', '..')
const FIRST = 'core'
const REST = ['express', 'fastify', 'koa', 'nestjs', 'upstash', 'cloudflare', 'web', 'hono']
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

/** Builds one package, its output held until it ends so that two builds' lines do not interleave. */
function build(name) {
  return new Promise((done) => {
    const child = spawn(npm, ['run', 'build', '-w', `@tollgate/${name}`], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
    const out = []
    child.stdout.on('data', (d) => out.push(d))
    child.stderr.on('data', (d) => out.push(d))
    child.on('close', (code) => {
      process.stdout.write(Buffer.concat(out))
      done(code === 0)
    })
  })
}

if (!(await build(FIRST))) process.exit(1)
const queue = [...REST]
let failed = false
await Promise.all(
  [0, 1].map(async () => {
    while (queue.length > 0 && !failed) if (!(await build(queue.shift()))) failed = true
  }),
)
process.exit(failed ? 1 : 0)
