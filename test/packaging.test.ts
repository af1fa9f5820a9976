import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { distDir, REPO_ROOT } from './harness/built-packages'

// Users get the built packages, not our sources: each must load through `import` and `require`
// by its package name, with the same exports. `npm test` builds them first.
const root = REPO_ROOT
const expected: Record<string, string[]> = {
  '@tollgate/core': ['Limiter', 'MemoryStore', 'RedisStore', 'TollgateError', 'rateLimitHeaders', 'parseDuration'],
  '@tollgate/express': ['rateLimit', 'RateLimit', 'MemoryStore', 'RedisStore'],
  '@tollgate/fastify': ['rateLimit', 'RateLimit', 'MemoryStore', 'RedisStore'],
  '@tollgate/koa': ['rateLimit', 'RateLimit', 'MemoryStore', 'RedisStore'],
  '@tollgate/upstash': ['UpstashStore'],
  '@tollgate/cloudflare': ['DurableObjectStore', 'TollgateCounter'],
  '@tollgate/web': ['withRateLimit', 'rateLimit', 'rateLimitOf', 'MemoryStore', 'RedisStore'],
  '@tollgate/hono': ['rateLimit', 'MemoryStore', 'RedisStore'],
  '@tollgate/nestjs': ['TollgateModule', 'TollgateGuard', 'RateLimit', 'SkipRateLimit', 'RateLimitException', 'MemoryStore', 'RedisStore'],
}

function node(args: string[]): string {
  return execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8', timeout: 20_000 }).trim()
}

describe.each(Object.entries(expected))('the built %s package', (name, exportsExpected) => {
  const dir = distDir(name)

  it('has been built (npm test runs npm run build first)', () => {
    expect(existsSync(join(dir, 'index.js')) && existsSync(join(dir, 'index.cjs'))).toBe(true)
    expect(existsSync(join(dir, 'index.d.ts')) && existsSync(join(dir, 'index.d.cts'))).toBe(true)
  })

  it('loads with require() and with import, exporting the same names', () => {
    const required = JSON.parse(node(['-e', `console.log(JSON.stringify(Object.keys(require(${JSON.stringify(name)})).sort()))`]))
    const imported = JSON.parse(
      node([
        '--input-type=module',
        '-e',
        `const m = await import(${JSON.stringify(name)}); console.log(JSON.stringify(Object.keys(m).sort()))`,
      ]),
    )
    expect(imported).toEqual(required)
    for (const exported of exportsExpected) expect(required).toContain(exported)
  })
})
