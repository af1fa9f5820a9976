// Koa 3 benchmark server: one case per process.
//   node bench/servers/koa.mjs --case <case> --port <port> [--max N --window-ms MS --redis URL --prefix P]
// buildApp and limiterFor are also what hook-cost.mjs measures in process.
import Router from '@koa/router'
import Koa from 'koa'
import {
  BODY,
  fail,
  floorResponses,
  importTollgate,
  isMain,
  minimalLimiter,
  minimalRedisLimiter,
  ready,
  redis,
  serverArgs,
} from './common.mjs'

/** The case's middleware (null for bare). */
export async function limiterFor(name, args) {
  const { max, windowMs, prefix } = args
  switch (name) {
    case 'bare':
      return null
    case 'floor': {
      // Same calls as @tollgate/koa makes to write its headers and its refusal.
      const f = floorResponses(max, windowMs)
      const body = Buffer.from(f.body)
      return (ctx, next) => {
        void ctx.ip
        if (!f.over()) {
          for (const name in f.ok) ctx.res.setHeader(name, f.ok[name])
          return next()
        }
        for (const name in f.refused) ctx.res.setHeader(name, f.refused[name])
        ctx.status = 429
        ctx.type = f.contentType
        ctx.body = body
      }
    }
    case 'minimal': {
      // The floor's calls, with a per-client count (see minimalLimiter).
      const m = minimalLimiter(max, windowMs)
      const body = Buffer.from(m.body)
      return (ctx, next) => {
        const value = m.take(ctx.ip)
        if (value !== undefined) {
          ctx.res.setHeader('RateLimit-Policy', m.policy)
          ctx.res.setHeader('RateLimit', value)
          return next()
        }
        const refused = m.refused()
        for (const name in refused) ctx.res.setHeader(name, refused[name])
        ctx.status = 429
        ctx.type = m.contentType
        ctx.body = body
      }
    }
    case 'minimal-redis': {
      // minimal's calls, with the count in Redis (see minimalRedisLimiter); null: Redis failed.
      const m = await minimalRedisLimiter(max, windowMs, args.redisUrl, prefix)
      const body = Buffer.from(m.body)
      return (ctx, next) =>
        new Promise((resolve) =>
          m.take(ctx.ip, (value) => {
            if (value) {
              ctx.res.setHeader('RateLimit-Policy', m.policy)
              ctx.res.setHeader('RateLimit', value)
              return resolve(next())
            }
            if (value === null) ctx.status = 500
            else {
              const refused = m.refused()
              for (const name in refused) ctx.res.setHeader(name, refused[name])
              ctx.status = 429
              ctx.type = m.contentType
              ctx.body = body
            }
            resolve()
          }),
        )
    }
    case 'tollgate-memory':
    case 'tollgate-memory-no-headers': {
      // The second: no quota fields, as rate-limiter-flexible's middleware (hook-cost.mjs only).
      const { rateLimit } = await importTollgate('koa')
      return rateLimit({ max, window: windowMs, ...(name === 'tollgate-memory' ? {} : { headers: false }) })
    }
    case 'tollgate-redis': {
      const { rateLimit, RedisStore } = await importTollgate('koa')
      return rateLimit({ max, window: windowMs, prefix, store: new RedisStore({ client: await redis(args.redisUrl) }) })
    }
    case 'krl-memory':
    case 'krl-redis': {
      // koa-ratelimit: memory driver (a Map) or redis driver (async-ratelimiter's sorted-set Lua script).
      const { default: ratelimit } = await import('koa-ratelimit')
      return ratelimit({
        driver: name === 'krl-memory' ? 'memory' : 'redis',
        db: name === 'krl-memory' ? new Map() : await redis(args.redisUrl),
        duration: windowMs,
        max,
        namespace: prefix,
      })
    }
    default:
      fail(`koa: unknown case ${name}`)
  }
}

/** The case's app, not listening: the limiter, then the routes. */
export async function buildApp(caseName, args) {
  const app = new Koa()
  // Trust X-Forwarded-For (Koa cannot restrict this to loopback); ctx.ip is then the forwarded client.
  app.proxy = true
  const limiter = await limiterFor(caseName, args)
  if (limiter) app.use(limiter)
  const router = new Router()
  router.get('/', (ctx) => {
    ctx.body = BODY
  })
  // Used once by the runner's checks (trust proxy works); never under load.
  router.get('/__ip', (ctx) => {
    ctx.body = { ip: ctx.ip }
  })
  app.use(router.routes())
  return app
}

if (isMain(import.meta.url)) {
  const args = serverArgs()
  const app = await buildApp(args.caseName, args)
  const server = app.listen(args.port, '127.0.0.1', () => ready(server, args.caseName))
  server.on('error', (err) => fail(`listen: ${err.message}`))
}
