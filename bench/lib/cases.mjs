// What the HTTP benchmark runs: the cases per framework and the three modes.

export const CASES = {
  bare: { label: 'bare (no limiter)' },
  floor: { label: 'floor: the same headers and 429, no limiter logic' },
  minimal: { label: 'minimal: the floor plus a hand-written per-client count (memory)' },
  'minimal-redis': {
    label:
      'minimal, Redis: the minimal limiter counting in Redis (hand-written MULTI/INCRBY/PEXPIRE/EXEC on a raw socket, batched per turn)',
    redis: true,
  },
  'tollgate-memory': { label: 'Tollgate, memory', tollgate: true },
  'tollgate-redis': { label: 'Tollgate, Redis', tollgate: true, redis: true },
  // Like for like with rate-limiter-flexible's middleware, which writes no quota fields. Optional: it
  // runs only when --cases names it exactly, so the default run is unchanged.
  'tollgate-memory-no-headers': { label: 'Tollgate, memory, headers: false (no quota fields)', tollgate: true, optional: true },
  'erl-memory': { label: 'express-rate-limit, memory' },
  'erl-redis': { label: 'express-rate-limit + rate-limit-redis', redis: true },
  'rlf-memory': { label: 'rate-limiter-flexible, memory (hand-written middleware)' },
  'rlf-redis': { label: 'rate-limiter-flexible, Redis (hand-written middleware)', redis: true },
  'frl-memory': { label: '@fastify/rate-limit, memory (LRU, 5000 keys)' },
  'frl-redis': { label: '@fastify/rate-limit, Redis', redis: true },
  'krl-memory': { label: 'koa-ratelimit, memory (Map)' },
  'krl-redis': { label: 'koa-ratelimit, Redis (sorted-set log)', redis: true },
}

/**
 * Whether a `--cases` list keeps case `id` (of the cases `ids`): an entry that is itself a case's id
 * keeps that case alone (`minimal` is not also `minimal-redis`, `tollgate-memory` not also its
 * `-no-headers` twin); any other entry keeps every case it begins (`tollgate`, `frl`).
 */
export function picks(wanted, id, ids) {
  return wanted.some((w) => w === id || (!ids.includes(w) && id.startsWith(w)))
}

// bare first; the order of the others only matters for the forward/reverse rotation. Every framework
// runs the same reference cases and Tollgate's, then its own peers.
const OURS = ['bare', 'floor', 'minimal', 'minimal-redis', 'tollgate-memory', 'tollgate-memory-no-headers', 'tollgate-redis']
export const FRAMEWORKS = {
  express: [...OURS, 'erl-memory', 'erl-redis', 'rlf-memory', 'rlf-redis'],
  fastify: [...OURS, 'frl-memory', 'frl-redis'],
  koa: [...OURS, 'krl-memory', 'krl-redis'],
}

export const MODES = {
  one: {
    label: 'overhead, one client',
    what: 'one client IP, limit never reached (max 1e9 per 1 s window)',
    max: 1e9,
    windowMs: 1000,
    script: 'one',
  },
  many: {
    label: 'overhead, many clients',
    what: 'distinct client IPs via X-Forwarded-For from a trusted proxy, round-robin; limit never reached (max 1e9 per 1 s window)',
    max: 1e9,
    windowMs: 1000,
    script: 'many',
  },
  flood: {
    label: 'flood',
    what: 'one client far over its limit (max 10 per 60 s window): almost every response is a 429',
    max: 10,
    windowMs: 60_000,
    script: 'one',
  },
}

// With --baseline DIR, every Tollgate case gets a twin `<case>@base`: the same server code, with
// @tollgate/<framework> imported from DIR (see lib/baseline.mjs).
const BASE_SUFFIX = '@base'

/** The case a twin runs (`tollgate-redis@base` -> `tollgate-redis`); other ids are returned as they are. */
export const baseOf = (id) => (id.endsWith(BASE_SUFFIX) ? id.slice(0, -BASE_SUFFIX.length) : id)

/** CASES[id], also for a baseline twin (then with `baseline: true` and `of`, the case it twins). */
export function caseInfo(id) {
  if (!id.endsWith(BASE_SUFFIX)) return CASES[id]
  const of = baseOf(id)
  return { ...CASES[of], label: `${CASES[of].label}, baseline`, baseline: true, of }
}

/** The case ids with each Tollgate case followed by its baseline twin. */
export const withTwins = (ids) => ids.flatMap((id) => (CASES[id]?.tollgate ? [id, `${id}${BASE_SUFFIX}`] : [id]))
