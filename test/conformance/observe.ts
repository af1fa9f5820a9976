import type { Logger, Store } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { get } from '../support/http'
import type { AppSpec } from './apps'
import type { Observation, Scenario } from './scenarios'

/** A running app: its base URL and how to stop it. */
export interface Running {
  url: string
  stop(): Promise<void>
}

/**
 * Runs one scenario's steps against the app `start` builds from its spec, on `store`, and returns what
 * a client observed (the parts that must be identical in every framework) and what was logged.
 */
export async function observe(
  scenario: Scenario,
  store: Store,
  name: string,
  start: (spec: AppSpec) => Promise<Running>,
): Promise<{ observations: Observation[]; logs: string[] }> {
  // 250 ms into a minute, so the seconds left are the same in every run.
  let now = Math.floor(Date.now() / 60_000) * 60_000 + 60_250
  const logs: string[] = []
  const logger: Logger = { warn: (m) => void logs.push(m), error: (m) => void logs.push(m) }
  const spec = scenario.app({ store, prefix: testPrefix(`conformance-${name}`), clock: () => now, logger })
  const app = await start(spec)
  const observations: Observation[] = []
  try {
    for (const step of scenario.steps) {
      now += step.advance ?? 0
      const r = await get(`${app.url}${step.path ?? '/'}`, { method: step.method ?? 'GET', headers: step.headers })
      const refused = r.status !== 200
      const h = (header: string) => r.headers[header] as string | undefined
      observations.push(
        Object.fromEntries(
          Object.entries({
            status: r.status,
            ratelimit: h('ratelimit'),
            policy: h('ratelimit-policy'),
            retryAfter: h('retry-after'),
            cacheControl: refused ? h('cache-control') : undefined,
            contentType: refused ? h('content-type') : undefined,
            body: refused ? r.body : undefined,
          }).filter(([, v]) => v !== undefined),
        ) as unknown as Observation,
      )
    }
  } finally {
    await app.stop()
  }
  return { observations, logs }
}
