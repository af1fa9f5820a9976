// Prepares a release of every Tollgate package at one version (see RELEASING.md):
//
//   node scripts/release.mjs <version> [--dry-run]      e.g. npm run release -- 0.2.0
//
// The packages are released together, at the same version: an adapter is built against the core of
// its own commit, so "@tollgate/express 0.2.0 needs @tollgate/core ^0.2.0" is the one rule, and a user
// never has to find which core goes with which adapter. This script
//   - sets "version" in every packages/*/package.json;
//   - sets every dependency on a sibling package to ^<version> (the external suite fails a tarball whose
//     sibling range is anything else);
//   - moves CHANGELOG.md's "## [Unreleased]" entries under "## [<version>] - <date>" (Keep a Changelog),
//     refusing to release when there are none;
//   - updates package-lock.json (npm install --package-lock-only, nothing downloaded).
// It commits, tags and publishes nothing: RELEASING.md lists those steps.
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const argv = process.argv.slice(2)
const dryRun = argv.includes('--dry-run')
const version = argv.find((a) => !a.startsWith('--'))
const SEMVER = /^(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?$/

function die(message) {
  console.error(`release: ${message}`)
  process.exit(1)
}

if (!version || !SEMVER.test(version)) die(`give the version to release, like 0.2.0 (got ${version ?? 'nothing'})`)

const packages = readdirSync(join(root, 'packages'))
  .map((dir) => ({ file: join(root, 'packages', dir, 'package.json') }))
  .map((p) => ({ ...p, json: JSON.parse(readFileSync(p.file, 'utf8')) }))
  .filter((p) => !p.json.private)
const names = new Set(packages.map((p) => p.json.name))
const current = [...new Set(packages.map((p) => p.json.version))]
if (current.length !== 1) die(`the packages are at different versions (${current.join(', ')}): set them to one by hand first`)
const order = (v) => SEMVER.exec(v).slice(1, 4).map(Number)
const [a, b] = [order(current[0]), order(version)]
const newer = b[0] - a[0] || b[1] - a[1] || b[2] - a[2]
if (newer < 0 || (newer === 0 && !version.includes('-'))) die(`${version} is not after the current version ${current[0]}`)

// CHANGELOG.md: the Unreleased section's entries become the release's.
const changelogFile = join(root, 'CHANGELOG.md')
const changelog = readFileSync(changelogFile, 'utf8')
const heading = /^## \[Unreleased\][^\n]*\n/m.exec(changelog)
if (!heading) die('CHANGELOG.md has no "## [Unreleased]" section')
const bodyStart = heading.index + heading[0].length
const next = changelog.slice(bodyStart).search(/^## /m)
const body = changelog.slice(bodyStart, next === -1 ? undefined : bodyStart + next)
if (!/^- /m.test(body)) die('CHANGELOG.md lists nothing under "## [Unreleased]": say what changed before releasing')
const date = new Date().toISOString().slice(0, 10)
const released = `${changelog.slice(0, bodyStart)}\n## [${version}] - ${date}\n${changelog.slice(bodyStart)}`

for (const p of packages) {
  p.json.version = version
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'devDependencies']) {
    for (const dep of Object.keys(p.json[field] ?? {})) if (names.has(dep)) p.json[field][dep] = `^${version}`
  }
  console.log(`${p.json.name} ${current[0]} -> ${version}`)
}
console.log(`CHANGELOG.md: "## [Unreleased]" entries now under "## [${version}] - ${date}"`)
if (dryRun) {
  console.log('release: dry run, nothing written')
  process.exit(0)
}
for (const p of packages) writeFileSync(p.file, `${JSON.stringify(p.json, null, 2)}\n`)
writeFileSync(changelogFile, released)
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const lock = spawnSync(npm, ['install', '--package-lock-only', '--ignore-scripts', '--no-audit', '--no-fund'], {
  cwd: root,
  stdio: 'inherit',
})
if (lock.status !== 0) die('npm install --package-lock-only failed: package-lock.json is not updated')
spawnSync(process.execPath, [join(root, 'scripts', 'lock-platforms.mjs')], { cwd: root, stdio: 'inherit' })
console.log(`release: ${version} prepared. Next (RELEASING.md): bash .ci/run, commit, git tag v${version}, npm publish --workspaces`)
