/**
 * The other limiters' names for Tollgate's options (express-rate-limit, @fastify/rate-limit,
 * koa-ratelimit, rate-limiter-flexible, @nestjs/throttler), so that an option carried over from one
 * of them is answered with the name it has here. A name whose Tollgate option an adapter does not
 * know is left to the general hint.
 */
const PEER_NAMES: Readonly<Record<string, string>> = {
  windowMs: 'window',
  timeWindow: 'window',
  duration: 'window',
  ttl: 'window',
  interval: 'window',
  limit: 'max',
  points: 'max',
  keyGenerator: 'key',
  getKey: 'key',
  id: 'key',
  standardHeaders: 'headers',
  addHeaders: 'headers',
  enableDraftSpec: 'headers',
  passOnStoreError: 'onStoreError',
  skipOnError: 'onStoreError',
  insuranceLimiter: 'onStoreError',
  whitelist: 'allowList',
  blacklist: 'denyList',
  keyPrefix: 'prefix',
  nameSpace: 'prefix',
  namespace: 'prefix',
  ban: 'blockDuration',
  errorResponseBuilder: 'message',
  redis: 'store',
  driver: 'store',
  db: 'store',
  storeClient: 'store',
}

/** The option an unknown `name` was probably meant to be: a peer limiter's name for it, or a near spelling. */
export function guessOption(name: string, known: readonly string[]): string | undefined {
  const peer = PEER_NAMES[name]
  if (peer !== undefined && known.includes(peer)) return peer
  const lower = name.toLowerCase()
  return known.find((k) => k.toLowerCase() === lower || (lower.startsWith(k.toLowerCase()) && k.length > 2))
}
