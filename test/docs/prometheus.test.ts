import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { REPO_ROOT } from '../harness/built-packages'
import { getFreePort, type RedisServer, startRedisServer } from '../harness/redis-server'
import { type Child, describeWith, findBinary, startChild, waitFor } from './external-tools'

// The Grafana dashboard and the alert rules against a real Prometheus (Debian's package): it scrapes the
// monitoring demo (examples/monitoring/server.ts, counting in a redis-server this file starts) every second
// while a bounded load runs, healthy, then with Redis frozen, then healthy again. Every PromQL expression of
// the dashboard's panels and of the rules must then return at least one series with a value over that span,
// and `promtool check rules` must pass. Everything listens on 127.0.0.1 only and is killed by its PID.

const DASHBOARD = join(REPO_ROOT, 'examples', 'grafana', 'tollgate.json')
const RULES = join(REPO_ROOT, 'examples', 'prometheus', 'tollgate-rules.yml')
const JOB = 'tollgate-demo'
const HOST = '127.0.0.1'

interface Dashboard {
  panels: Array<{ title: string; targets: Array<{ expr: string }> }>
  templating: { list: Array<{ name: string; type: string; definition?: string }> }
}

/** Every alert expression of the rules file, by alert name (the file is plain YAML; its `expr:` values are read as written). */
function alertExpressions(yaml: string): Array<{ name: string; expr: string }> {
  const found: Array<{ name: string; expr: string }> = []
  const lines = yaml.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const alert = /^\s*- alert: (\S+)/.exec(lines[i]!)
    if (!alert) continue
    for (let j = i + 1; j < lines.length && !/^\s*- alert:/.test(lines[j]!); j++) {
      const expr = /^(\s*)expr: (.*)$/.exec(lines[j]!)
      if (!expr) continue
      if (expr[2] !== '|') {
        found.push({ name: alert[1]!, expr: expr[2]!.trim() })
        break
      }
      const body: string[] = []
      for (let k = j + 1; k < lines.length && (lines[k]!.startsWith(`${expr[1]}  `) || lines[k]!.trim() === ''); k++)
        body.push(lines[k]!.trim())
      found.push({ name: alert[1]!, expr: body.join(' ').trim() })
      break
    }
  }
  return found
}

/** A panel query as Grafana sends it once the dashboard's variables are chosen: every job of the demo, all policies. */
function asGrafanaSends(expr: string): string {
  return expr.replaceAll('$__rate_interval', '5s').replaceAll('$job', JOB).replaceAll('$policy', '.*')
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard
const rules = alertExpressions(readFileSync(RULES, 'utf8'))
const panelQueries = dashboard.panels.flatMap((p) => p.targets.map((t, i) => ({ name: `${p.title} [${i}]`, expr: t.expr })))

it('reads every query of the dashboard and every alert of the rules file', () => {
  expect(panelQueries.length).toBeGreaterThanOrEqual(10)
  expect(rules.map((r) => r.name)).toEqual([
    'TollgateStoreDegraded',
    'TollgateDecisionsWithoutStore',
    'TollgateStoreErrors',
    'TollgateStoreSlow',
    'TollgateRefusalShareHigh',
  ])
  for (const { expr } of [...panelQueries, ...rules]) expect(expr).toMatch(/tollgate_/)
})

describeWith(['prometheus', 'promtool'], 'apt-get install prometheus; .ci/run does')('against a real Prometheus', () => {
  let redis: RedisServer
  let demo: Child
  let prometheus: Child
  let dir: string
  let api: string
  let span: { start: number; end: number }

  const query = async (path: string, params: Record<string, string>) => {
    const response = await fetch(`${api}${path}?${new URLSearchParams(params)}`)
    const body = (await response.json()) as { status: string; error?: string; data: unknown }
    if (body.status !== 'success') throw new Error(`Prometheus ${path} ${JSON.stringify(params)}: ${body.error}`)
    return body.data
  }

  /** The series a range query over the load returns that hold at least one finite value. */
  const seriesWithValues = async (expr: string) => {
    const data = (await query('/api/v1/query_range', {
      query: expr,
      start: String(span.start / 1000),
      end: String(span.end / 1000),
      step: '1',
    })) as { result: Array<{ metric: Record<string, string>; values: Array<[number, string]> }> }
    return data.result.filter((s) => s.values.some(([, v]) => Number.isFinite(Number(v))))
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-prometheus-'))
    redis = await startRedisServer()
    const [port, metricsPort, prometheusPort] = [await getFreePort(), await getFreePort(), await getFreePort()]
    demo = startChild(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'examples', 'monitoring', 'server.ts')], {
      cwd: REPO_ROOT,
      env: { ...process.env, PORT: String(port), METRICS_PORT: String(metricsPort), REDIS_URL: redis.url },
    })
    const app = `http://${HOST}:${port}`
    await waitFor(`the demo to listen (${demo.output()})`, 20_000, async () => ((await fetch(`${app}/`)).ok ? true : undefined))

    writeFileSync(
      join(dir, 'prometheus.yml'),
      [
        'global: { scrape_interval: 1s, evaluation_interval: 1s }',
        `rule_files: [${JSON.stringify(RULES)}]`,
        'scrape_configs:',
        `  - job_name: ${JOB}`,
        `    static_configs: [{ targets: ['${HOST}:${metricsPort}'] }]`,
        '',
      ].join('\n'),
    )
    prometheus = startChild(findBinary('prometheus')!, [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=${HOST}:${prometheusPort}`,
      '--log.level=warn',
    ])
    api = `http://${HOST}:${prometheusPort}`
    await waitFor(`Prometheus to be ready (${prometheus.output()})`, 30_000, async () =>
      (await fetch(`${api}/-/ready`)).ok ? true : undefined,
    )
    await waitFor('the first scrape of the demo', 15_000, async () => {
      const data = (await query('/api/v1/query', { query: `up{job="${JOB}"} == 1` })) as { result: unknown[] }
      return data.result.length > 0 ? true : undefined
    })

    // The load: 8 loops of requests, bounded in count and time, from 30 client IPs (one of them hot, so the
    // `api` policy refuses) with every tenth request a login (5 a minute per client, so `login` refuses).
    span = { start: Date.now(), end: 0 }
    let sent = 0
    let stop = false
    const loops = Array.from({ length: 8 }, async () => {
      while (!stop && sent < 20_000) {
        const i = sent++
        const ip = i % 4 === 0 ? '203.0.113.250' : `203.0.113.${i % 30}`
        const login = i % 10 === 0
        await fetch(`${app}${login ? '/login' : '/'}`, { method: login ? 'POST' : 'GET', headers: { 'x-forwarded-for': ip } }).then((r) =>
          r.arrayBuffer(),
        )
        // Paced (about 60 requests a second in all): the store calls that wait out their deadline while Redis
        // is frozen must be more than 1% of the run's calls for the p99 alert to see them, which an unpaced
        // load on a fast machine drowns.
        await new Promise((resolve) => setTimeout(resolve, 120))
      }
    })
    const phase = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
    try {
      await phase(4000)
      // Redis stops answering: store calls time out, decisions fall back, the circuit opens.
      redis.freeze()
      await phase(3000)
    } finally {
      redis.thaw()
    }
    await phase(3000)
    stop = true
    await Promise.all(loops)
    // Two more scrapes and rule evaluations after the last request.
    await phase(2500)
    span.end = Date.now()
  }, 120_000)

  afterAll(async () => {
    await prometheus?.stop()
    await demo?.stop()
    if (redis?.running) redis.thaw()
    await redis?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('has every dashboard panel query return at least one series', async () => {
    const empty: string[] = []
    for (const { name, expr } of panelQueries) if ((await seriesWithValues(asGrafanaSends(expr))).length === 0) empty.push(name)
    expect(empty).toEqual([])
  })

  it("finds values for the dashboard's variables (job, policy)", async () => {
    const values = async (label: string, match: string) => (await query(`/api/v1/label/${label}/values`, { 'match[]': match })) as string[]
    for (const variable of dashboard.templating.list.filter((v) => v.type === 'query')) {
      const m = /^label_values\((.*), (\w+)\)$/.exec(variable.definition ?? '')
      expect(m).not.toBeNull()
      expect(await values(m![2]!, asGrafanaSends(m![1]!))).not.toEqual([])
    }
    expect(await values('tollgate_policy', 'tollgate_decisions_total')).toEqual(expect.arrayContaining(['api', 'login']))
  })

  it('has every alert expression return at least one series (each alert would have fired during the load)', async () => {
    const empty: string[] = []
    for (const { name, expr } of rules) if ((await seriesWithValues(expr)).length === 0) empty.push(name)
    expect(empty).toEqual([])
  })

  it('loads the rules file with every rule healthy, and promtool check rules passes', async () => {
    const data = (await query('/api/v1/rules', {})) as {
      groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }>
    }
    const loaded = data.groups.flatMap((g) => g.rules)
    expect(loaded.map((r) => [r.name, r.health, r.lastError ?? ''])).toEqual(rules.map((r) => [r.name, 'ok', '']))
    const check = spawnSync(findBinary('promtool')!, ['check', 'rules', RULES], { encoding: 'utf8' })
    expect(`${check.stdout}${check.stderr}`).toMatch(/SUCCESS: 5 rules found/)
    expect(check.status).toBe(0)
  })
})
