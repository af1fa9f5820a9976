#!/usr/bin/env node
// Bun and Deno for the tests (test/runtimes/), from their npm packages, the root devDependencies `bun` and `deno`.
// Each carries its binary in a package per platform, an optional dependency that npm installs for this
// machine only (@oven/bun-linux-x64, @deno/linux-x64-glibc...). The runtime's own package has a postinstall
// script that puts that binary in its bin/ entry: Bun's moves it there from the platform package, Deno's
// links it. An install that runs no scripts (npm ci --ignore-scripts, an npm that holds scripts back until
// they are approved) leaves Bun's bin/ entry without the binary, which stays in the platform package. So the
// binary is looked for in both places, found with require.resolve from the runtime's package, and the first
// that answers --version is the one: it is there after any install, with scripts or without.
//
// Usage: node scripts/runtimes.cjs   prints each runtime's version and binary; exits 1 when one is missing
const { spawnSync } = require('node:child_process')
const { existsSync } = require('node:fs')
const { createRequire } = require('node:module')
const { dirname, join, relative } = require('node:path')

const fromRoot = createRequire(join(__dirname, '..', 'package.json'))

/** glibc or musl, for the Linux packages that come in both. */
function libc() {
  return process.report?.getReport()?.header?.glibcVersionRuntime === undefined ? 'musl' : 'glibc'
}

/** Where this platform's binary of `runtime` can be: its platform package, then the runtime package's bin entry. */
function candidates(runtime) {
  const { platform, arch } = process
  const exe = platform === 'win32' ? '.exe' : ''
  if (runtime === 'bun') {
    const os = platform === 'win32' ? 'windows' : platform
    const cpu = arch === 'arm64' ? 'aarch64' : arch
    const musl = platform === 'linux' && libc() === 'musl' ? '-musl' : ''
    return { name: `@oven/bun-${os}-${cpu}${musl}`, inside: `bin/bun${exe}`, entry: 'bin/bun.exe' }
  }
  if (runtime === 'deno')
    return { name: `@deno/${platform}-${arch}${platform === 'linux' ? '-glibc' : ''}`, inside: `deno${exe}`, entry: `deno${exe}` }
  throw new Error(`unknown runtime ${JSON.stringify(runtime)}: expected bun or deno`)
}

const ENV = { ...process.env, DENO_NO_UPDATE_CHECK: '1' }

/** What `binary --version` prints, or undefined when it is no binary that runs here (Bun's placeholder). */
function versionOf(binary) {
  const run = spawnSync(binary, ['--version'], { encoding: 'utf8', timeout: 20_000, env: ENV })
  return run.status === 0 ? run.stdout.trim().split('\n')[0] : undefined
}

const found = new Map()

/**
 * The binary of `runtime` ("bun" or "deno") for this machine, from its npm package, and its version.
 * Throws, naming what to install, when there is none.
 */
function runtimeInstall(runtime) {
  if (found.has(runtime)) return found.get(runtime)
  const { name, inside, entry } = candidates(runtime)
  let own
  try {
    own = dirname(fromRoot.resolve(`${runtime}/package.json`))
  } catch {
    throw new Error(`${runtime} is not installed: npm ci installs it (a root devDependency)`)
  }
  const paths = [join(own, entry)]
  try {
    paths.unshift(join(dirname(createRequire(join(own, 'package.json')).resolve(`${name}/package.json`)), inside))
  } catch {
    // No platform package: the install moved nothing into the bin entry either, unless it ran the script.
  }
  for (const binary of paths) {
    const version = existsSync(binary) ? versionOf(binary) : undefined
    if (version !== undefined) {
      const install = { binary, version }
      found.set(runtime, install)
      return install
    }
  }
  throw new Error(
    `no ${runtime} binary for this platform runs (looked for ${name}, an optional dependency of ${runtime}, and ${runtime}'s ${entry}): run npm ci`,
  )
}

/** The binary of `runtime` ("bun" or "deno") for this machine: see runtimeInstall. */
function runtimeBinary(runtime) {
  return runtimeInstall(runtime).binary
}

module.exports = { runtimeBinary, runtimeInstall }

if (require.main === module) {
  let failed = false
  for (const runtime of ['bun', 'deno']) {
    try {
      const { binary, version } = runtimeInstall(runtime)
      console.log(`  ${runtime} ${version.replace(/^deno /, '')} (${relative(process.cwd(), binary)})`)
    } catch (error) {
      console.log(`  ${runtime}: ${error.message}`)
      failed = true
    }
  }
  process.exit(failed ? 1 : 0)
}
