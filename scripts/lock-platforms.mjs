// Adds lockfile entries for optional platform binaries (biome, rollup) that `npm install` left out
// because the registry it used does not serve them. Without these entries `npm ci` refuses the lock
// ("Missing: ... from lock file"). Each entry carries the package's os/cpu/libc, so `npm ci` skips it
// on any other platform without fetching it. Run after `npm install` changes the lock.
import { readFileSync, writeFileSync } from 'node:fs'

const file = new URL('../package-lock.json', import.meta.url)
const lock = JSON.parse(readFileSync(file, 'utf8'))
const OS = ['android', 'darwin', 'freebsd', 'linux', 'openbsd', 'openharmony', 'sunos', 'win32', 'aix']
const CPU = ['arm64', 'x64', 'ia32', 'arm', 'loong64', 'ppc64', 'riscv64', 's390x', 'mips64el', 'wasm32']

function platform(name) {
  const parts = name.split('/').pop().split('-')
  const os = parts.find((p) => OS.includes(p))
  const cpu = parts.find((p) => CPU.includes(p))
  const libc = parts.includes('musl') ? 'musl' : os === 'linux' && /gnu/.test(name) ? 'glibc' : undefined
  return { os, cpu, libc }
}

let added = 0
for (const [path, meta] of Object.entries(lock.packages)) {
  for (const [dep, version] of Object.entries(meta.optionalDependencies ?? {})) {
    const at = `node_modules/${dep}`
    if (lock.packages[at] || lock.packages[`${path}/${at}`]) continue
    const { os, cpu, libc } = platform(dep)
    if (!os || !cpu) continue // not a platform binary: leave it to npm
    lock.packages[at] = { version, dev: meta.dev ?? undefined, optional: true, os: [os], cpu: [cpu], ...(libc ? { libc: [libc] } : {}) }
    added++
  }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))))
writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`)
console.log(`lock-platforms: added ${added} optional platform entries`)
