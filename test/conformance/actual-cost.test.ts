import { createServer, type Server } from 'node:http'
import { join } from 'node:path'
import { createAdaptorServer } from '@hono/node-server'
import type { DynamicModule, INestApplication } from '@nestjs/common'
import { type Logger, MemoryStore, type Store } from '@tollgate/core'
import * as tgExpress from '@tollgate/express'
import * as tgFastify from '@tollgate/fastify'
import * as tgHono from '@tollgate/hono'
import * as tgKoa from '@tollgate/koa'
import type { TollgateModuleOptions } from '@tollgate/nestjs'
import * as tgWeb from '@tollgate/web'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import Koa from 'koa'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { compileFixtures } from '../nestjs/compile'
import { close, get, listen } from '../support/http'

// The actualCost option over HTTP, in each framework's own idiom: a request is admitted with its cost
// as an estimate, and once its response has ended it is settled to what the response says it cost
// (here the x-actual-cost header, as an LLM gateway reports its tokens), which the next request's
// RateLimit remaining shows.

const db = useRedis()
const stores = db.stores(() => new MemoryStore({ sweepIntervalMs: 0 }))

/** The options every framework gets, its own actualCost aside: 100 units a minute, 10 estimated per request. */
interface Setup {
  store: Store
  prefix: string
  clock: () => number
  logger: Logger
}
const base = (s: Setup) => ({ max: 100, window: '1m' as const, cost: 10, ...s })
/** What the response's header says; `broken` makes actualCost throw, reject or return a bad value instead. */
type Broken = 'throws' | 'rejects' | 'NaN' | undefined
const reported = (header: unknown, broken: Broken): number | Promise<number> => {
  if (broken === 'throws') throw new Error('no usage in the reply')
  if (broken === 'rejects') return Promise.reject(new Error('usage lookup failed'))
  if (broken === 'NaN') return Number('tokens')
  return Number(header)
}

interface Running {
  url: string
  stop(): Promise<void>
}
type Start = (s: Setup, broken: Broken) => Promise<Running>

let nest: {
  meteredModule(options: TollgateModuleOptions): DynamicModule
  start(p: string, root: DynamicModule): Promise<{ app: INestApplication; url: string }>
}
let compiled: ReturnType<typeof compileFixtures>
beforeAll(() => {
  compiled = compileFixtures()
  nest = {
    ...(require(join(compiled.dir, 'actual-cost.js')) as Pick<typeof nest, 'meteredModule'>),
    ...(require(join(compiled.dir, 'stacked.js')) as Pick<typeof nest, 'start'>),
  }
}, 120_000)
afterAll(() => compiled?.remove())

const served = async (server: Server): Promise<Running> => ({ url: await listen(server), stop: () => close(server) })

const FRAMEWORKS: Array<[string, Start]> = [
  [
    'Express',
    (s, broken) => {
      const app = express()
      const actualCost = (_req: express.Request, res: express.Response) => reported(res.getHeader('x-actual-cost'), broken)
      app.get('/', tgExpress.rateLimit({ ...base(s), actualCost }), (req, res) => {
        res.setHeader('x-actual-cost', String(req.query.actual))
        res.send('ok')
      })
      return served(createServer(app))
    },
  ],
  [
    'Fastify',
    async (s, broken) => {
      const app = Fastify()
      const actualCost = (_request: unknown, reply: import('fastify').FastifyReply) => reported(reply.getHeader('x-actual-cost'), broken)
      await app.register(tgFastify.rateLimit, { ...base(s), actualCost })
      app.get('/', async (request, reply) => {
        reply.header('x-actual-cost', String((request.query as { actual?: string }).actual))
        return 'ok'
      })
      await app.ready()
      return served(app.server)
    },
  ],
  [
    'Koa',
    (s, broken) => {
      const app = new Koa()
      app.use(tgKoa.rateLimit({ ...base(s), actualCost: (ctx) => reported(ctx.response.get('x-actual-cost'), broken) }))
      app.use((ctx) => {
        ctx.set('x-actual-cost', String(ctx.query.actual))
        ctx.body = 'ok'
      })
      return served(createServer(app.callback()))
    },
  ],
  [
    '@tollgate/web',
    (s, broken) => {
      const handler = tgWeb.withRateLimit(
        (request: Request) => new Response('ok', { headers: { 'x-actual-cost': String(new URL(request.url).searchParams.get('actual')) } }),
        { ...base(s), actualCost: (_request, response: Response) => reported(response.headers.get('x-actual-cost'), broken) },
      )
      return served(createAdaptorServer({ fetch: handler }) as Server)
    },
  ],
  [
    'Hono',
    (s, broken) => {
      const app = new Hono()
      app.use(
        tgHono.rateLimit({ ...base(s), actualCost: (_c, response: Response) => reported(response.headers.get('x-actual-cost'), broken) }),
      )
      app.get('/', (c) => {
        c.header('x-actual-cost', String(c.req.query('actual')))
        return c.text('ok')
      })
      return served(createAdaptorServer({ fetch: app.fetch }) as Server)
    },
  ],
  ...(['express', 'fastify'] as const).map((platform): [string, Start] => [
    `NestJS on platform-${platform}`,
    async (s, broken) => {
      const actualCost = (_req: unknown, res: { getHeader(name: string): unknown }) => reported(res.getHeader('x-actual-cost'), broken)
      const { app, url } = await nest.start(platform, nest.meteredModule({ ...base(s), actualCost }))
      return { url, stop: () => app.close() }
    },
  ]),
]

/** Runs GET /?actual=<n> for each n, and returns the `r` (remaining) of each response's RateLimit field, and the logs. */
async function remainingAfter(
  start: Start,
  store: Store,
  actuals: number[],
  broken?: Broken,
): Promise<{ remaining: number[]; logs: string[] }> {
  const logs: string[] = []
  const logger: Logger = { warn: (m) => void logs.push(m), error: (m) => void logs.push(m) }
  const now = Math.floor(Date.now() / 60_000) * 60_000 + 60_250
  const app = await start({ store, prefix: testPrefix('actual-cost'), clock: () => now, logger }, broken)
  const remaining: number[] = []
  try {
    for (const actual of actuals) {
      const r = await get(`${app.url}/?actual=${actual}`)
      expect(r.status).toBe(200)
      remaining.push(Number(/;r=(\d+)/.exec(String(r.headers.ratelimit))?.[1]))
    }
  } finally {
    await app.stop()
  }
  return { remaining, logs }
}

describe.each(stores)('actualCost on the %s store', (_store, makeStore) => {
  describe.each(FRAMEWORKS)('in %s', (_framework, start) => {
    it("settles each request to the cost its response reports, which the next request's remaining shows", async () => {
      // Each request is admitted at 10 and settled to its actual cost when its response has ended:
      // 100 − 10 → 90; 100 − 3 − 10 → 87; 100 − 3 − 50 − 10 → 37; the third settled to 0 → 37 again.
      const { remaining, logs } = await remainingAfter(start, makeStore(), [3, 50, 0, 0])
      expect(remaining).toEqual([90, 87, 37, 37])
      expect(logs).toEqual([])
    })

    it.each<Broken>(['throws', 'rejects', 'NaN'])('keeps the estimate when actualCost %s, and logs it once', async (broken) => {
      const { remaining, logs } = await remainingAfter(start, makeStore(), [3, 3, 3], broken)
      expect(remaining).toEqual([90, 80, 70])
      expect(logs).toHaveLength(1)
      expect(logs[0]).toMatch(/option "actualCost" (threw|rejected|returned NaN).*keep their estimated cost/)
    })
  })
})

describe('actualCost is validated when the limit is built', () => {
  const bad = 'the tokens header' as never
  it.each<[string, () => unknown]>([
    ['Express rateLimit()', () => tgExpress.rateLimit({ actualCost: bad })],
    ['Koa rateLimit()', () => tgKoa.rateLimit({ actualCost: bad })],
    ['@tollgate/web withRateLimit()', () => tgWeb.withRateLimit(() => new Response(), { actualCost: bad })],
    ['Hono rateLimit()', () => tgHono.rateLimit({ actualCost: bad })],
    ['fastify register()', () => Fastify().register(tgFastify.rateLimit, { actualCost: bad })],
  ])('%s rejects a value that is not a function, naming the option and the value', async (_where, build) => {
    await expect(Promise.resolve().then(build)).rejects.toMatchObject({
      code: 'TG_INVALID_OPTION',
      message: expect.stringMatching(/"actualCost".*got "the tokens header" \(string\)/),
    })
  })
})
