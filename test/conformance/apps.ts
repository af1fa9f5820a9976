import { createServer, type Server } from 'node:http'
import Router from '@koa/router'
import * as tgExpress from '@tollgate/express'
import * as tgFastify from '@tollgate/fastify'
import * as tgKoa from '@tollgate/koa'
import express from 'express'
import Fastify from 'fastify'
import Koa from 'koa'

/** Limiter options shared by the three adapters (the framework-specific `handler` is described by `refuse`). */
export type Options = Omit<tgExpress.RateLimitOptions, 'handler'> & { key?: (req: { headers: Record<string, unknown> }) => string }

export interface RouteSpec {
  method: 'GET' | 'POST'
  path: string
  /** A limit of the route's own, stacked on the global one; `false` opts the route out. */
  limit?: Options | false
  /** Served by a controller method decorated with `@RateLimit(decorated)`. */
  decorated?: Options
  /**
   * One limiter instance reached twice on the way to the route. Express and Koa mount the same
   * middleware on the app (so it also covers routes declared after this one) and on the route. fastify
   * has no such idiom, since each plugin registration and each route config builds a limiter of its own,
   * so there one `@RateLimit` decorator limits both the handler and the method it delegates to.
   */
  mountedTwice?: Options
  /** A slow handler: answers once this resolves, so the request stays in flight until the test lets it end. */
  hold?: () => Promise<void>
}

/** One app, described once and built in each framework's own idiom. */
export interface AppSpec {
  global?: Options
  routes: RouteSpec[]
  /** Trust X-Forwarded-For from loopback (Express "trust proxy", fastify trustProxy, Koa app.proxy). */
  trustProxy?: boolean
  /**
   * A custom refusal through each framework's `handler` option, sent as text/plain. Without `status`
   * the handler sets none, leaving the status to the limiter.
   */
  refuse?: { status?: number; body: string }
}

export type Framework = 'express' | 'fastify' | 'koa'
export const FRAMEWORKS: Framework[] = ['express', 'fastify', 'koa']

const reply = 'ok'

function expressApp(spec: AppSpec): Server {
  const app = express()
  if (spec.trustProxy) app.set('trust proxy', 'loopback')
  const refuse = spec.refuse
  const handler = refuse
    ? (_req: express.Request, res: express.Response) => {
        if (refuse.status !== undefined) res.status(refuse.status)
        res.set('Content-Type', 'text/plain; charset=utf-8').send(refuse.body)
      }
    : undefined
  const withHandler = (o: Options) => ({ ...(o as tgExpress.RateLimitOptions), ...(handler ? { handler } : {}) })
  // An opted-out route sits before the global middleware: Express's idiom for "not limited".
  for (const r of spec.routes.filter((r) => r.limit === false))
    app[r.method === 'GET' ? 'get' : 'post'](r.path, (_q, s) => void s.send(reply))
  if (spec.global) app.use(tgExpress.rateLimit(withHandler(spec.global)))
  for (const r of spec.routes.filter((r) => r.limit !== false)) {
    const add = app[r.method === 'GET' ? 'get' : 'post'].bind(app)
    const decorated = r.decorated
    if (decorated) {
      const limit = tgExpress.RateLimit(withHandler(decorated))
      class Controller {
        @limit
        async handle(_req: express.Request, res: express.Response) {
          res.send(reply)
        }
      }
      const controller = new Controller()
      add(r.path, (req, res, next) => void controller.handle(req, res).catch(next))
    } else if (r.mountedTwice) {
      const limiter = tgExpress.rateLimit(withHandler(r.mountedTwice))
      app.use(limiter)
      add(r.path, limiter, (_q, s) => void s.send(reply))
    } else if (r.limit) add(r.path, tgExpress.rateLimit(withHandler(r.limit)), (_q, s) => void s.send(reply))
    else if (r.hold) add(r.path, (_q, s, next) => void r.hold!().then(() => s.send(reply), next))
    else add(r.path, (_q, s) => void s.send(reply))
  }
  return createServer(app)
}

async function fastifyApp(spec: AppSpec): Promise<Server> {
  const app = Fastify({ trustProxy: spec.trustProxy ? '127.0.0.1' : false })
  const refuse = spec.refuse
  const handler = refuse
    ? (_req: unknown, res: import('fastify').FastifyReply) =>
        (refuse.status === undefined ? res : res.code(refuse.status)).type('text/plain; charset=utf-8').send(refuse.body)
    : undefined
  const withHandler = (o: Options) => ({ ...(o as tgFastify.RateLimitOptions), ...(handler ? { handler } : {}) })
  // Route config needs the plugin; the scenarios with route limits all have a global limit.
  if (spec.global) await app.register(tgFastify.rateLimit, withHandler(spec.global))
  for (const r of spec.routes) {
    const decorated = r.decorated
    if (decorated) {
      const limit = tgFastify.RateLimit(withHandler(decorated))
      class Controller {
        @limit
        handle(_req: import('fastify').FastifyRequest, res: import('fastify').FastifyReply) {
          return res.send(reply)
        }
      }
      const controller = new Controller()
      app.route({ method: r.method, url: r.path, handler: (req, res) => controller.handle(req, res) })
    } else if (r.mountedTwice) {
      const limit = tgFastify.RateLimit(withHandler(r.mountedTwice))
      class Controller {
        @limit
        handle(req: import('fastify').FastifyRequest, res: import('fastify').FastifyReply) {
          return this.answer(req, res)
        }
        @limit
        answer(_req: import('fastify').FastifyRequest, res: import('fastify').FastifyReply) {
          return res.send(reply)
        }
      }
      const controller = new Controller()
      app.route({ method: r.method, url: r.path, handler: (req, res) => controller.handle(req, res) })
    } else {
      const config: import('fastify').FastifyContextConfig =
        r.limit === undefined ? {} : { rateLimit: r.limit === false ? false : withHandler(r.limit) }
      const hold = r.hold
      app.route({ method: r.method, url: r.path, config, handler: hold ? () => hold().then(() => reply) : async () => reply })
    }
  }
  await app.ready()
  return app.server
}

function koaApp(spec: AppSpec): Server {
  const app = new Koa()
  app.proxy = spec.trustProxy === true
  const refuse = spec.refuse
  const handler = refuse
    ? (ctx: Koa.Context) => {
        if (refuse.status !== undefined) ctx.status = refuse.status
        ctx.type = 'text/plain; charset=utf-8'
        ctx.body = refuse.body
      }
    : undefined
  const withHandler = (o: Options) => ({ ...(o as tgKoa.RateLimitOptions), ...(handler ? { handler } : {}) })
  const answer = (ctx: Koa.Context) => {
    ctx.body = reply
  }
  const open = new Router()
  for (const r of spec.routes.filter((r) => r.limit === false)) open[r.method === 'GET' ? 'get' : 'post'](r.path, answer)
  app.use(open.routes())
  if (spec.global) app.use(tgKoa.rateLimit(withHandler(spec.global)))
  const router = new Router()
  for (const r of spec.routes.filter((r) => r.limit !== false)) {
    const add = router[r.method === 'GET' ? 'get' : 'post'].bind(router)
    const decorated = r.decorated
    if (decorated) {
      const limit = tgKoa.RateLimit(withHandler(decorated))
      class Controller {
        @limit
        async handle(ctx: Koa.Context) {
          ctx.body = reply
        }
      }
      const controller = new Controller()
      add(r.path, (ctx) => controller.handle(ctx))
    } else if (r.mountedTwice) {
      // Before app.use(router.routes()) below, so the app-level mount runs first, as in Express.
      const limiter = tgKoa.rateLimit(withHandler(r.mountedTwice))
      app.use(limiter)
      add(r.path, limiter, answer)
    } else if (r.limit) add(r.path, tgKoa.rateLimit(withHandler(r.limit)), answer)
    else if (r.hold) add(r.path, (ctx) => r.hold!().then(() => answer(ctx)))
    else add(r.path, answer)
  }
  app.use(router.routes())
  return createServer(app.callback())
}

export async function build(framework: Framework, spec: AppSpec): Promise<Server> {
  if (framework === 'express') return expressApp(spec)
  if (framework === 'fastify') return fastifyApp(spec)
  return koaApp(spec)
}
