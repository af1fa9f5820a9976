import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import semver from 'semver'

// npm run check:peers (scripts/check-peers.mjs): every peer range against the registry's latest. Here the latest
// versions come from the command line, so the test needs no registry and sees a made-up range named.
const root = join(__dirname, '..', '..')
const script = join(root, 'scripts', 'check-peers.mjs')

function peers(): Array<{ pkg: string; peer: string; range: string }> {
  const out = []
  for (const dir of readdirSync(join(root, 'packages'))) {
    const manifest = JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8'))
    for (const [peer, range] of Object.entries<string>(manifest.peerDependencies ?? {})) out.push({ pkg: manifest.name, peer, range })
  }
  return out
}

function run(...args: string[]) {
  const r = spawnSync(process.execPath, [script, ...args], { encoding: 'utf8', timeout: 20_000 })
  return { status: r.status, out: `${r.stdout}${r.stderr}` }
}

/** --latest for every peer: the highest version each package's ranges all admit, so nothing is outside. */
function admittedLatest(): string[] {
  const byPeer = new Map<string, string[]>()
  for (const { peer, range } of peers()) byPeer.set(peer, [...(byPeer.get(peer) ?? []), range])
  return [...byPeer].flatMap(([peer, ranges]) => {
    const version = semver.minVersion(ranges[0]!)!.version
    expect(ranges.every((r) => semver.satisfies(version, r))).toBe(true)
    return ['--latest', `${peer}=${version}`]
  })
}

describe('npm run check:peers', () => {
  it('admits the current majors of the clients and NestJS', () => {
    const ranges = new Map(peers().map((p) => [`${p.pkg}:${p.peer}`, p.range]))
    for (const version of ['5.0.0', '6.0.0']) expect(semver.satisfies(version, ranges.get('@tollgate/core:ioredis')!)).toBe(true)
    for (const version of ['4.6.0', '5.0.0', '6.3.1']) expect(semver.satisfies(version, ranges.get('@tollgate/core:redis')!)).toBe(true)
    for (const peer of ['@nestjs/common', '@nestjs/core'])
      for (const version of ['10.0.0', '11.0.0', '12.5.1'])
        expect(semver.satisfies(version, ranges.get(`@tollgate/nestjs:${peer}`)!)).toBe(true)
  })

  it('passes quietly when every latest is inside its range', () => {
    const r = run(...admittedLatest())
    expect(r.out).toContain('every peer range admits')
    expect(r.out).not.toContain('OUTSIDE')
    expect(r.status).toBe(0)
  })

  it('names a peer whose latest is outside a made-up range, as a warning, and fails with --strict', () => {
    const args = [...admittedLatest(), '--range', '@tollgate/core:ioredis=^4.0.0', '--latest', 'ioredis=6.0.0']
    const warned = run(...args)
    expect(warned.out).toContain('OUTSIDE  @tollgate/core: ioredis ^4.0.0 does not admit latest 6.0.0')
    expect(warned.out).toContain('check:peers: warning: 1 peer range(s) do not admit')
    expect(warned.status).toBe(0)
    expect(run(...args, '--strict').status).toBe(1)
  })
})
