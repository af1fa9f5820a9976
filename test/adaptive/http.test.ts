import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createAdaptorServer } from '@hono/node-server'
import type { AdaptiveGate, Priority } from '@tollgate/core/adapter'
import { adaptiveConcurrency as honoAdaptive } from '@tollgate/hono'
import { withAdaptiveConcurrency } from '@tollgate/web'
import { Hono } from 'hono'
import { frameworks as nodeFrameworks, type Serve } from '../overload/rig'
import { expectShed, until } from '../support/shed'

// Over real HTTP on each framework (@tollgate/web and Hono on Node through @hono/node-server): a fixed limit
// of 4 in flight and a queue of 2, handlers that run until the test lets them end. No timing decides
// anything: the order of events does.

const priorityOf = (headers: Headers): Priority => (headers.get('x-priority') as Priority | null) ?? 'normal'

/** A fetch handler served on Node, as the Fetch API adapters are in the conformance suite. */
async function serveFetch(fetch: (request: Request, env: unknown) => Promise<Response> | Response, gate: AdaptiveGate) {
  const server = createAdaptorServer({ fetch }) as Server
  server.listen(0, '127.0.0.1')
  await new Promise((r) => server.once('listening', r))
  const { port } = server.address() as AddressInfo
  const close = () => {
    server.closeAllConnections()
    return new Promise<void>((r) => server.close(() => r()))
  }
  return { url: `http://127.0.0.1:${port}`, gate, close }
}

const frameworks: Record<string, Serve> = {
  ...nodeFrameworks,
  web: async (options, handle) => {
    const guarded = withAdaptiveConcurrency(
      async (request: Request) => {
        await handle(new URL(request.url).pathname.slice(1))
        return new Response('ok')
      },
      { ...options, priority: (request) => priorityOf(request.headers) },
    )
    return serveFetch(guarded, guarded.gate)
  },
  hono: async (options, handle) => {
    const app = new Hono()
    const mw = honoAdaptive({ ...options, priority: (c) => priorityOf(c.req.raw.headers) })
    app.use(mw)
    app.get('/:name', async (c) => {
      await handle(c.req.param('name'))
      return c.text('ok')
    })
    return serveFetch(app.fetch, mw.gate)
  },
}

describe.each(Object.keys(frameworks))('%s', (name) => {
  test('past the limit and a full queue, the lowest class is shed with a 503; critical traffic is served first; every slot comes back', async () => {
    const started: string[] = []
    const waiting = new Map<string, () => void>()
    const handle = (n: string) =>
      new Promise<void>((resolve) => {
        started.push(n)
        waiting.set(n, resolve)
      })
    const options = { initialLimit: 4, minLimit: 4, maxLimit: 4, maxQueue: 2, queueTimeout: '30s', eventLoopUtilization: false } as const
    const { url, gate, close } = await frameworks[name]!(options, handle)
    try {
      const get = (n: string, priority: Priority) => fetch(`${url}/${n}`, { headers: { 'x-priority': priority } })
      const first = ['a', 'b', 'c', 'd'].map((n) => get(n, 'normal'))
      await until(() => started.length === 4)
      const s1 = get('s1', 'sheddable')
      await until(() => gate.queueLength === 1)
      const s2 = get('s2', 'sheddable')
      await until(() => gate.queueLength === 2)
      const critical = get('crit', 'critical')
      // The queue was full: the oldest sheddable waiter gave its place to the critical request.
      await expectShed(await s1)
      expect(gate.shed).toEqual({ critical: 0, normal: 0, sheddable: 1 })
      // One slot frees: the critical request takes it, ahead of the sheddable one that came before it.
      waiting.get('a')!()
      await until(() => started.length === 5)
      expect(started[4]).toBe('crit')
      for (const n of ['b', 'c', 'd', 'crit']) waiting.get(n)!()
      await until(() => started.length === 6)
      expect(started[5]).toBe('s2')
      waiting.get('s2')!()
      const answers = await Promise.all([...first, critical, s2])
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200])
      await until(() => gate.inflight === 0)
    } finally {
      await close()
    }
  })
})
