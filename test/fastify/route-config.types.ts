// Type test, checked by `npm run typecheck` (tsc --noEmit), never run: each @ts-expect-error line
// must really be an error, or tsc fails with "Unused '@ts-expect-error' directive".
import { type RateLimitOptions, rateLimit } from '@tollgate/fastify'
import Fastify from 'fastify'

export async function routes() {
  const app = Fastify()
  await app.register(rateLimit, { max: 10, hook: 'preHandler' })

  // A correctly typed route limit compiles, and the request carries its decisions.
  app.post(
    '/login',
    { config: { rateLimit: { max: 5, window: '1 minute', key: (request) => request.ip, handler: (_request, reply) => reply.send() } } },
    async (request) => ({ remaining: request.rateLimit?.remaining, limits: request.rateLimits?.length }),
  )
  app.get('/health', { config: { rateLimit: false } }, async () => 'ok')
  const strict: RateLimitOptions = { max: 1, window: '1s' }
  app.get('/strict', { config: { rateLimit: strict } }, async (request) => request.routeOptions.config.rateLimit)

  // @ts-expect-error max is a number (or a function), not a string
  app.get('/a', { config: { rateLimit: { max: 'ten' } } }, async () => 'a')
  // @ts-expect-error window is ms or a duration string such as "1 minute"
  app.get('/b', { config: { rateLimit: { window: 'soon' } } }, async () => 'b')
  // @ts-expect-error hook is "onRequest" or "preHandler"
  app.get('/d', { config: { rateLimit: { hook: 'onSend' } } }, async () => 'd')
  // fastify infers its ContextConfig generic from the literal and intersects it with
  // FastifyContextConfig, so `rateLimit: true` and unknown keys such as `windowMs` pass the type
  // check; the plugin rejects both when the route is declared (see plugin.test.ts).
  // @ts-expect-error plugin options are checked too
  await app.register(rateLimit, { max: '10' })
}
