import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { distDir, REPO_ROOT } from '../harness/built-packages'

// The debug log and the global-provider metrics of the BUILT packages, in child processes, from the ESM
// and from the CJS build: NODE_DEBUG is read by Node at startup, and @opentelemetry/api is loaded with
// import(), which each build compiles its own way. `npm test` builds the packages first.
const root = REPO_ROOT
const KEY = '203.0.113.77'

/** A script deciding 3 requests of one client against max 2, then printing what the SDK recorded. */
function script(kind: 'esm' | 'cjs'): string {
  const load = (names: string, from: string) =>
    kind === 'esm' ? `import { ${names} } from '${from}'` : `const { ${names} } = require('${from}')`
  return `
${load('Limiter', '@tollgate/core')}
${load('metrics', '@opentelemetry/api')}
${load('AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader', '@opentelemetry/sdk-metrics')}
const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3600000 })
if (process.env.WITH_SDK) metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }))
// A fixed clock: three decisions on a real one could straddle a window's end, and the third be allowed.
const limiter = new Limiter({ max: 2, name: 'child', clock: () => 1_700_000_000_500 })
// The limiter loads @opentelemetry/api with import(): let that finish, as a server's startup would.
setTimeout(async () => {
  for (let i = 0; i < 3; i++) limiter.consume(${JSON.stringify(KEY)})
  await reader.forceFlush()
  const points = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics))
    .filter((m) => m.descriptor.name === 'tollgate.decisions').flatMap((m) => m.dataPoints)
    .map((p) => p.attributes['tollgate.outcome'] + '=' + p.value)
  process.stdout.write(JSON.stringify(points.sort()))
}, 200)
`
}

function run(kind: 'esm' | 'cjs', env: Record<string, string>): Promise<{ stdout: string; stderr: string }> {
  const args = kind === 'esm' ? ['--input-type=module', '-e', script(kind)] : ['-e', script(kind)]
  const { NODE_DEBUG: _, ...rest } = process.env
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { cwd: root, env: { ...rest, ...env }, timeout: 20_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${kind} child failed: ${error.message}\n${stderr}`))
      else resolve({ stdout, stderr })
    })
  })
}

beforeAll(() => {
  if (!existsSync(join(distDir('@tollgate/core'), 'index.cjs'))) throw new Error('packages are not built: run npm run build')
})

describe.each(['esm', 'cjs'] as const)('the %s build', (kind) => {
  it('logs nothing without NODE_DEBUG=tollgate', async () => {
    const { stderr } = await run(kind, {})
    expect(stderr).toBe('')
  })

  it('logs one line per decision (key hashed) and per store call with NODE_DEBUG=tollgate', async () => {
    const { stderr } = await run(kind, { NODE_DEBUG: 'tollgate' })
    const lines = stderr.trim().split('\n')
    const decisions = lines.filter((l) => / decision /.test(l))
    expect(decisions).toHaveLength(3)
    expect(decisions[0]).toMatch(
      /^TOLLGATE \d+: decision key=[0-9a-f]{8} policy=child count=1 limit=2 remaining=1 source=store allowed=true$/,
    )
    expect(decisions[2]).toMatch(/ count=3 limit=2 remaining=0 source=store allowed=false$/)
    const stores = lines.filter((l) => / store /.test(l))
    expect(stores).toHaveLength(3)
    expect(stores[0]).toMatch(/^TOLLGATE \d+: store increment node=- duration=\d+\.\d{3}ms outcome=ok$/)
    expect(stderr).not.toContain(KEY)
  })

  it('records into a global MeterProvider registered by the app, and nothing without one', async () => {
    expect(JSON.parse((await run(kind, { WITH_SDK: '1' })).stdout)).toEqual(['allowed=2', 'limited=1'])
    expect(JSON.parse((await run(kind, {})).stdout)).toEqual([])
  })
})
