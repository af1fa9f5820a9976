// Express 5 benchmark server: one case per process.
//   node bench/servers/express.mjs --case <case> --port <port> [--max N --window-ms MS --redis URL --prefix P]
// buildApp and limiterFor are also what hook-cost.mjs measures in process.
import express from 'express'
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
      // Same calls as @tollgate/express makes to write its headers and its refusal.
      const f = floorResponses(max, windowMs)
      const body = Buffer.from(f.body)
      return (req, res, next) => {
        void req.ip
        if (!f.over()) {
          for (const name in f.ok) res.setHeader(name, f.ok[name])
          return next()
        }
        for (const name in f.refused) res.setHeader(name, f.refused[name])
        res.status(429)
        res.setHeader('Content-Type', f.contentType)
        res.end(body)
      }
    }
    case 'minimal': {
      // The floor's calls, with a per-client count (see minimalLimiter).
      const m = minimalLimiter(max, windowMs)
      const body = Buffer.from(m.body)
      return (req, res, next) => {
        const value = m.take(req.ip)
        if (value !== undefined) {
          res.setHeader('RateLimit-Policy', m.policy)
          res.setHeader('RateLimit', value)
          return next()
        }
        const refused = m.refused()
        for (const name in refused) res.setHeader(name, refused[name])
        res.status(429)
        res.setHeader('Content-Type', m.contentType)
        res.end(body)
      }
    }
    case 'minimal-redis': {
      // minimal's calls, with the count in Redis (see minimalRedisLimiter); null: Redis failed.
      const m = await minimalRedisLimiter(max, windowMs, args.redisUrl, prefix)
      const body = Buffer.from(m.body)
      return (req, res, next) => {
        m.take(req.ip, (value) => {
          if (value) {
            res.setHeader('RateLimit-Policy', m.policy)
            res.setHeader('RateLimit', value)
            return next()
          }
          if (value === null) return res.status(500).end()
          const refused = m.refused()
          for (const name in refused) res.setHeader(name, refused[name])
          res.status(429)
          res.setHeader('Content-Type', m.contentType)
          res.end(body)
        })
      }
    }
    case 'tollgate-memory':
    case 'tollgate-memory-no-headers': {
      // The second: no quota fields, as rate-limiter-flexible's middleware (hook-cost.mjs only).
      const { rateLimit } = await importTollgate('express')
      return rateLimit({ max, window: windowMs, ...(name === 'tollgate-memory' ? {} : { headers: false }) })
    }
    case 'tollgate-redis': {
      const { rateLimit, RedisStore } = await importTollgate('express')
      return rateLimit({ max, window: windowMs, prefix, store: new RedisStore({ client: await redis(args.redisUrl) }) })
    }
    case 'tollgate-lease': {
      // tollgate-redis with quota leasing (lease.mjs runs it, several processes sharing one key).
      const { rateLimit, RedisStore } = await importTollgate('express')
      return rateLimit({ max, window: windowMs, prefix, lease: true, store: new RedisStore({ client: await redis(args.redisUrl) }) })
    }
    case 'erl-memory': {
      const { rateLimit } = await import('express-rate-limit')
      return rateLimit({ windowMs, limit: max })
    }
    case 'erl-redis': {
      const { rateLimit } = await import('express-rate-limit')
      const { RedisStore } = await import('rate-limit-redis')
      const client = await redis(args.redisUrl)
      return rateLimit({
        windowMs,
        limit: max,
        store: new RedisStore({ sendCommand: (command, ...rest) => client.call(command, ...rest), prefix }),
      })
    }
    case 'rlf-memory':
    case 'rlf-redis': {
      // rate-limiter-flexible has no Express middleware; this is the one from its README, except that
      // a store error becomes a 500 (not a 429) so the checks cannot mistake failures for limiting.
      const { RateLimiterMemory, RateLimiterRedis } = await import('rate-limiter-flexible')
      const opts = { points: max, duration: windowMs / 1000, keyPrefix: prefix }
      const limiter =
        name === 'rlf-memory' ? new RateLimiterMemory(opts) : new RateLimiterRedis({ ...opts, storeClient: await redis(args.redisUrl) })
      return (req, res, next) => {
        limiter.consume(req.ip).then(
          () => next(),
          (rej) => {
            if (rej instanceof Error) next(rej)
            else res.status(429).send('Too Many Requests')
          },
        )
      }
    }
    default:
      fail(`express: unknown case ${name}`)
  }
}

/** The case's app, not listening: the limiter, then the routes. */
export async function buildApp(caseName, args) {
  const app = express()
  // Trust X-Forwarded-For from loopback only (wrk connects from 127.0.0.1); req.ip is then the
  // forwarded client, which every limiter above keys by.
  app.set('trust proxy', 'loopback')
  const limiter = await limiterFor(caseName, args)
  if (limiter) app.use(limiter)
  app.get('/', (_req, res) => {
    res.json(BODY)
  })
  // Used once by the runner's checks (trust proxy works); never under load.
  app.get('/__ip', (req, res) => {
    res.json({ ip: req.ip })
  })
  return app
}

if (isMain(import.meta.url)) {
  const args = serverArgs()
  const app = await buildApp(args.caseName, args)
  const server = app.listen(args.port, '127.0.0.1', (err) => {
    if (err) fail(`listen: ${err.message}`)
    ready(server, args.caseName)
  })
}
