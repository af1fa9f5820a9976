import type { Server } from 'node:http'
import { createAdaptorServer } from '@hono/node-server'
import * as tgHono from '@tollgate/hono'
import * as tgWeb from '@tollgate/web'
import { type Context, Hono, type MiddlewareHandler } from 'hono'
import { type AppSpec, build, FRAMEWORKS, type Framework, type Options } from './apps'

/*
 * The conformance apps of the two Fetch API adapters, served on Node through @hono/node-server (the
 * bridge from Node's http to a fetch handler, which passes Node's request along, as Bun and Deno pass
 * theirs). What the scenarios describe in a framework's idiom that these adapters have no idiom for
 * (decorators, a custom refusal handler; for @tollgate/web, one limiter reached twice) is left to the
 * frameworks that have one: `expresses` says which specs an adapter can build.
 */

export type FetchFramework = 'web' | 'hono'
/** Every adapter the conformance suite runs. */
export type Adapter = Framework | FetchFramework
export const ADAPTERS: Adapter[] = [...FRAMEWORKS, 'web', 'hono']

const reply = 'ok'

/** Whether `adapter` has an idiom for everything `spec` describes. */
export function expresses(adapter: Adapter, spec: AppSpec): boolean {
  if (adapter !== 'web' && adapter !== 'hono') return true
  if (spec.refuse !== undefined) return false
  return spec.routes.every((r) => r.decorated === undefined && (adapter === 'hono' || r.mountedTwice === undefined))
}

const serve = (fetch: (request: Request, env: unknown) => Promise<Response> | Response): Server => createAdaptorServer({ fetch }) as Server

/** The proxy the scenarios trust sits on loopback and appends one entry. */
const proxy = (spec: AppSpec) => (spec.trustProxy ? { trustProxy: 1 } : {})

/**
 * The scenarios' `key` and `skip` read a request's headers as Node gives them (a plain object of
 * lower-case names): they get that view of the Request here.
 */
function readingHeaders<Req>(o: Options, headersOf: (req: Req) => Headers): Record<string, unknown> {
  const view = (req: Req) => ({ headers: Object.fromEntries(headersOf(req)) })
  const { key, skip, ...rest } = o
  return {
    ...rest,
    ...(key && { key: (req: Req) => key(view(req)) }),
    ...(skip && { skip: (req: Req) => skip(view(req) as never) }),
  }
}

/** One fetch handler: the opted-out routes first, then the global limit around the router. */
function webApp(spec: AppSpec): Server {
  const options = (o: Options): tgWeb.RateLimitOptions => ({ ...readingHeaders<Request>(o, (r) => r.headers), ...proxy(spec) })
  type Handler = (request: Request, env: unknown) => Promise<Response> | Response
  const answer: Handler = () => new Response(reply)
  const routes = spec.routes.map((r) => {
    let handler: Handler = answer
    if (r.hold) handler = () => r.hold!().then(() => new Response(reply))
    else if (r.limit) handler = tgWeb.withRateLimit(answer, options(r.limit))
    return { ...r, handler }
  })
  const route = (request: Request) => routes.find((r) => r.method === request.method && r.path === new URL(request.url).pathname)
  const router: Handler = (request, env) => route(request)?.handler(request, env) ?? new Response('not found', { status: 404 })
  const limited = spec.global ? tgWeb.withRateLimit(router, options(spec.global)) : router
  return serve((request, env) => (route(request)?.limit === false ? answer(request, env) : limited(request, env)))
}

function honoApp(spec: AppSpec): Server {
  const app = new Hono()
  const options = (o: Options): tgHono.RateLimitOptions => ({ ...readingHeaders<Context>(o, (c) => c.req.raw.headers), ...proxy(spec) })
  const add = (method: 'GET' | 'POST', path: string, ...handlers: MiddlewareHandler[]) =>
    app.on(method, path, ...(handlers as [MiddlewareHandler]))
  const answer: MiddlewareHandler = async (c) => c.text(reply)
  for (const r of spec.routes.filter((r) => r.limit === false)) add(r.method, r.path, answer)
  if (spec.global) app.use(tgHono.rateLimit(options(spec.global)))
  for (const r of spec.routes.filter((r) => r.limit !== false)) {
    if (r.mountedTwice) {
      const limit = tgHono.rateLimit(options(r.mountedTwice))
      app.use(limit)
      add(r.method, r.path, limit, answer)
    } else if (r.limit) add(r.method, r.path, tgHono.rateLimit(options(r.limit)), answer)
    else if (r.hold) add(r.method, r.path, async (c) => r.hold!().then(() => c.text(reply)))
    else add(r.method, r.path, answer)
  }
  return serve(app.fetch)
}

/** The app `spec` describes, built with `adapter` in its own idiom. */
export async function buildWith(adapter: Adapter, spec: AppSpec): Promise<Server> {
  if (adapter === 'web') return webApp(spec)
  if (adapter === 'hono') return honoApp(spec)
  return build(adapter, spec)
}
