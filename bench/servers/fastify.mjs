// Fastify 5 benchmark server: one case per process.
//   node bench/servers/fastify.mjs --case <case> --port <port> [--max N --window-ms MS --redis URL --prefix P]
// buildApp is also what hook-cost.mjs measures in process.
import Fastify from 'fastify'
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

/**
 * The case's app, not listening: the limiter registered, then the routes. `first`, when given, is an
 * onRequest hook that runs before the limiter's (hook-cost.mjs holds a request there).
 */
export async function buildApp(caseName, args, first) {
  const { max, windowMs, prefix } = args
  // Trust X-Forwarded-For from loopback only; request.ip is then the forwarded client.
  const app = Fastify({ logger: false, trustProxy: '127.0.0.1' })
  if (first) app.addHook('onRequest', first)
  await registerCase(app, caseName, args, { max, windowMs, prefix })
  app.get('/', async () => BODY)
  // Used once by the runner's checks (trust proxy works); never under load.
  app.get('/__ip', async (request) => ({ ip: request.ip }))
  return app
}

/** Header fields as [name, value] pairs, names in lower case, as @tollgate/fastify writes them. */
const lower = (record) => Object.entries(record).map(([name, value]) => [name.toLowerCase(), value])

/** The minimal limiters' refusal: the fields of the second's refusal record (lowered once per record), 429 and the body. */
function minimalRefusal(m) {
  const body = Buffer.from(m.body)
  let lastRefused
  let lowered
  return (reply) => {
    const refused = m.refused()
    if (refused !== lastRefused) {
      lastRefused = refused
      lowered = lower(refused)
    }
    for (const [name, value] of lowered) reply.header(name, value)
    reply.code(429).header('content-type', m.contentType).send(body)
  }
}

async function registerCase(app, caseName, args, { max, windowMs, prefix }) {
  switch (caseName) {
    case 'bare':
      break
    case 'floor': {
      // Same calls as @tollgate/fastify makes to write its headers and its refusal.
      const f = floorResponses(max, windowMs)
      const body = Buffer.from(f.body)
      // One reply.header() per field, names in lower case, as @tollgate/fastify writes them.
      const ok = lower(f.ok)
      const refused = lower(f.refused)
      app.addHook('onRequest', (request, reply, done) => {
        void request.ip
        if (!f.over()) {
          for (const [name, value] of ok) reply.header(name, value)
          return done()
        }
        for (const [name, value] of refused) reply.header(name, value)
        reply.code(429).header('content-type', f.contentType).send(body)
      })
      break
    }
    case 'minimal': {
      // The floor's calls, with a per-client count (see minimalLimiter).
      const m = minimalLimiter(max, windowMs)
      const refuse = minimalRefusal(m)
      app.addHook('onRequest', (request, reply, done) => {
        const value = m.take(request.ip)
        if (value === undefined) return refuse(reply)
        reply.header('ratelimit-policy', m.policy)
        reply.header('ratelimit', value)
        done()
      })
      break
    }
    case 'minimal-redis': {
      // minimal's calls, with the count in Redis (see minimalRedisLimiter); null: Redis failed.
      const m = await minimalRedisLimiter(max, windowMs, args.redisUrl, prefix)
      const refuse = minimalRefusal(m)
      app.addHook('onRequest', (request, reply, done) => {
        m.take(request.ip, (value) => {
          if (value === null) return reply.code(500).send()
          if (value === undefined) return refuse(reply)
          reply.header('ratelimit-policy', m.policy)
          reply.header('ratelimit', value)
          done()
        })
      })
      break
    }
    case 'tollgate-memory':
    case 'tollgate-memory-no-headers': {
      // The second: no quota fields, as rate-limiter-flexible's middleware (hook-cost.mjs only).
      const { rateLimit } = await importTollgate('fastify')
      await app.register(rateLimit, { max, window: windowMs, ...(caseName === 'tollgate-memory' ? {} : { headers: false }) })
      break
    }
    case 'tollgate-redis': {
      const { rateLimit, RedisStore } = await importTollgate('fastify')
      await app.register(rateLimit, {
        max,
        window: windowMs,
        prefix,
        store: new RedisStore({ client: await redis(args.redisUrl) }),
      })
      break
    }
    case 'frl-memory': {
      // @fastify/rate-limit with its default in-memory LRU store (5000 entries).
      const { default: rateLimit } = await import('@fastify/rate-limit')
      await app.register(rateLimit, { max, timeWindow: windowMs })
      break
    }
    case 'frl-redis': {
      const { default: rateLimit } = await import('@fastify/rate-limit')
      await app.register(rateLimit, { max, timeWindow: windowMs, redis: await redis(args.redisUrl), nameSpace: prefix })
      break
    }
    default:
      fail(`fastify: unknown case ${caseName}`)
  }
}

if (isMain(import.meta.url)) {
  const args = serverArgs()
  const app = await buildApp(args.caseName, args)
  try {
    await app.listen({ port: args.port, host: '127.0.0.1' })
  } catch (err) {
    fail(`listen: ${err.message}`)
  }
  ready(app.server, args.caseName)
}
