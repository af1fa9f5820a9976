#!/usr/bin/env node
// Compares every peer dependency range of the packages with the npm registry's `latest` of that package,
// and names each one whose latest is outside the range: a new major shows up here the day it is
// published, not in a user's ERESOLVE.
//
//   npm run check:peers                      warn (exit 0) when a latest is outside its range
//   npm run check:peers -- --strict          exit 1 then
//   npm run check:peers -- --latest ioredis=7.0.0 --range @tollgate/core:ioredis=^4.0.0
//                                            take a package's latest, or a peer's range, from the command line
//                                            instead of the registry or package.json (the tests use both)
//
// An optional peer counts as any other: users who install it meet the range just the same. A registry that
// cannot be reached is a warning of its own, never a pass.
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import semver from 'semver'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** Every peer range of the workspace's packages: [{ pkg, peer, range }]. */
export function peerRanges(dir = join(root, 'packages')) {
  const out = []
  for (const name of readdirSync(dir).sort()) {
    let manifest
    try {
      manifest = JSON.parse(readFileSync(join(dir, name, 'package.json'), 'utf8'))
    } catch {
      continue
    }
    for (const [peer, range] of Object.entries(manifest.peerDependencies ?? {})) out.push({ pkg: manifest.name, peer, range })
  }
  return out
}

/** The ranges whose package's latest is outside them, and those whose latest is unknown. */
export function outside(ranges, latest) {
  const outsideRange = []
  const unknown = []
  for (const r of ranges) {
    const version = latest.get(r.peer)
    if (version === undefined) unknown.push(r)
    else if (!semver.satisfies(version, r.range)) outsideRange.push({ ...r, latest: version })
  }
  return { outsideRange, unknown }
}

async function registryLatest(name) {
  const { stdout } = await promisify(execFile)(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['view', name, 'dist-tags.latest'], {
    timeout: 30_000,
  })
  const version = stdout.trim()
  if (semver.valid(version) === null) throw new Error(`npm view ${name} printed ${JSON.stringify(version)}`)
  return version
}

function pairs(argv, flag) {
  const out = []
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] !== flag) continue
    const value = argv[++i] ?? ''
    const at = value.lastIndexOf('=')
    if (at <= 0) throw new Error(`${flag} expects name=value, got ${JSON.stringify(value)}`)
    out.push([value.slice(0, at), value.slice(at + 1)])
  }
  return out
}

async function main(argv) {
  const strict = argv.includes('--strict')
  const ranges = peerRanges()
  for (const [where, range] of pairs(argv, '--range')) {
    const [pkg, peer] = where.includes(':')
      ? [where.slice(0, where.lastIndexOf(':')), where.slice(where.lastIndexOf(':') + 1)]
      : [undefined, where]
    const matching = ranges.filter((r) => r.peer === peer && (pkg === undefined || r.pkg === pkg))
    if (matching.length === 0) ranges.push({ pkg: pkg ?? '(given)', peer, range })
    for (const r of matching) r.range = range
  }
  const latest = new Map(pairs(argv, '--latest'))
  const errors = []
  await Promise.all(
    [...new Set(ranges.map((r) => r.peer))]
      .filter((peer) => !latest.has(peer))
      .map(async (peer) => {
        try {
          latest.set(peer, await registryLatest(peer))
        } catch (error) {
          errors.push(`${peer}: the registry's latest could not be read (${error.message.split('\n')[0]})`)
        }
      }),
  )
  const { outsideRange } = outside(ranges, latest)
  for (const r of ranges) {
    const version = latest.get(r.peer)
    if (version !== undefined && semver.satisfies(version, r.range))
      console.log(`ok       ${r.pkg}: ${r.peer} ${r.range} admits latest ${version}`)
  }
  for (const r of outsideRange) console.log(`OUTSIDE  ${r.pkg}: ${r.peer} ${r.range} does not admit latest ${r.latest}`)
  for (const e of errors) console.log(`UNKNOWN  ${e}`)
  if (outsideRange.length === 0 && errors.length === 0) {
    console.log(`check:peers: every peer range admits its package's latest (${ranges.length} ranges)`)
    return 0
  }
  const what = [
    outsideRange.length > 0 ? `${outsideRange.length} peer range(s) do not admit the registry's latest` : '',
    errors.length > 0 ? `${errors.length} latest version(s) unknown` : '',
  ]
    .filter(Boolean)
    .join('; ')
  console.log(`check:peers: warning: ${what}: test the new major and widen the range (CHANGELOG, peer ranges)`)
  return strict ? 1 : 0
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error) => {
      console.error(`check:peers: ${error.message}`)
      process.exit(2)
    },
  )
}
