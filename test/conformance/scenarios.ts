import type { Logger, Store } from '@tollgate/core'
import type { AppSpec } from './apps'

/** What a scenario gets to build its app: a fresh store, a unique prefix, the shared clock, a logger. */
export interface Setup {
  store: Store
  prefix: string
  clock: () => number
  logger: Logger
}

export interface Step {
  method?: 'GET' | 'POST'
  path?: string
  headers?: Record<string, string>
  /** Move the injected clock forward by this many ms before this step's request. */
  advance?: number
}

/** The parts of a response that must be identical in every framework. */
export interface Observation {
  status: number
  ratelimit?: string
  policy?: string
  retryAfter?: string
  cacheControl?: string
  contentType?: string
  body?: string
}

export interface Scenario {
  name: string
  app: (s: Setup) => AppSpec
  steps: Step[]
  statuses: number[]
  check?: (observations: Observation[], logs: string[]) => void
}

const GET = (n: number, step: Step = {}): Step[] => Array.from({ length: n }, () => step)

/** The scenario table: written once, run against Express, Fastify and Koa on the memory store and on Redis. */
export const scenarios: Scenario[] = [
  {
    name: 'allows max requests, then answers 429 with Retry-After and the RateLimit fields',
    app: (s) => ({ global: { max: 3, window: '1m', ...s }, routes: [{ method: 'GET', path: '/' }] }),
    steps: GET(4),
    statuses: [200, 200, 200, 429],
    check: (o) => {
      expect(o[0]).toMatchObject({ ratelimit: '"3-per-1m";r=2;t=60', policy: '"3-per-1m";q=3;w=60' })
      expect(o[3]).toMatchObject({
        ratelimit: '"3-per-1m";r=0;t=60',
        retryAfter: '60',
        cacheControl: 'no-store',
        contentType: 'application/problem+json',
      })
      expect(JSON.parse(o[3]!.body!)).toMatchObject({ title: 'Too Many Requests', status: 429 })
    },
  },
  {
    name: 'starts counting again at the next window',
    app: (s) => ({ global: { max: 2, window: '1s', ...s }, routes: [{ method: 'GET', path: '/' }] }),
    steps: [...GET(3), { advance: 750 }],
    statuses: [200, 200, 429, 200],
    check: (o) => expect(o[3]!.ratelimit).toBe('"2-per-1s";r=1;t=1'),
  },
  {
    name: 'lets skipped requests through uncounted and without headers',
    app: (s) => ({
      global: { max: 1, window: '1m', skip: (r) => (r as { headers: Record<string, unknown> }).headers['x-internal'] === 'yes', ...s },
      routes: [{ method: 'GET', path: '/' }],
    }),
    steps: [...GET(3, { headers: { 'x-internal': 'yes' } }), ...GET(2)],
    statuses: [200, 200, 200, 200, 429],
    check: (o) => expect(o[0]!.ratelimit).toBeUndefined(),
  },
  {
    name: 'counts by a custom key',
    app: (s) => ({
      global: { max: 1, window: '1m', key: (r) => String(r.headers['x-api-key']), ...s },
      routes: [{ method: 'GET', path: '/' }],
    }),
    steps: [{ headers: { 'x-api-key': 'a' } }, { headers: { 'x-api-key': 'b' } }, { headers: { 'x-api-key': 'a' } }],
    statuses: [200, 200, 429],
  },
  {
    name: 'sends a custom text message with a custom status code',
    app: (s) => ({ global: { max: 1, window: '1m', message: 'slow down', statusCode: 503, ...s }, routes: [{ method: 'GET', path: '/' }] }),
    steps: GET(2),
    statuses: [200, 503],
    check: (o) => expect(o[1]).toMatchObject({ body: 'slow down', contentType: 'text/plain; charset=utf-8', retryAfter: '60' }),
  },
  {
    name: 'sends a custom JSON message',
    app: (s) => ({ global: { max: 1, window: '1m', message: { error: 'too many' }, ...s }, routes: [{ method: 'GET', path: '/' }] }),
    steps: GET(2),
    statuses: [200, 429],
    check: (o) => expect(o[1]).toMatchObject({ body: '{"error":"too many"}', contentType: 'application/json; charset=utf-8' }),
  },
  {
    name: 'lets a custom handler answer the refusal, after the headers are set',
    app: (s) => ({
      global: { max: 1, window: '1m', ...s },
      routes: [{ method: 'GET', path: '/' }],
      refuse: { status: 418, body: 'teapot' },
    }),
    steps: GET(2),
    statuses: [200, 418],
    check: (o) => expect(o[1]).toMatchObject({ body: 'teapot', retryAfter: '60' }),
  },
  {
    // The handler only sends a body (res.send / reply.send / ctx.body): the limiter's statusCode must
    // already be on the response, or the refusal goes out as a 200 that clients read as success.
    name: 'a custom handler that sets no status still answers 429',
    app: (s) => ({ global: { max: 1, window: '1m', ...s }, routes: [{ method: 'GET', path: '/' }], refuse: { body: 'no' } }),
    steps: GET(2),
    statuses: [200, 429],
    check: (o) =>
      expect(o[1]).toMatchObject({
        body: 'no',
        policy: '"1-per-1m";q=1;w=60',
        ratelimit: '"1-per-1m";r=0;t=60',
        retryAfter: '60',
        cacheControl: 'no-store',
      }),
  },
  {
    name: 'stacks a route limit on the global one: both count, both show, the tighter decides',
    app: (s) => ({
      global: { max: 10, window: '1m', ...s },
      routes: [
        { method: 'GET', path: '/' },
        { method: 'POST', path: '/login', limit: { max: 2, window: '1m', ...s, prefix: `${s.prefix}login:` } },
      ],
    }),
    steps: [...GET(3, { method: 'POST', path: '/login' }), ...GET(1)],
    statuses: [200, 200, 429, 200],
    check: (o) => {
      expect(o[1]).toMatchObject({
        policy: '"10-per-1m";q=10;w=60, "2-per-1m";q=2;w=60',
        ratelimit: '"10-per-1m";r=8;t=60, "2-per-1m";r=0;t=60',
      })
      expect(o[3]!.ratelimit).toBe('"10-per-1m";r=6;t=60')
    },
  },
  {
    name: 'leaves an opted-out route alone',
    app: (s) => ({
      global: { max: 1, window: '1m', ...s },
      routes: [
        { method: 'GET', path: '/' },
        { method: 'GET', path: '/health', limit: false },
      ],
    }),
    steps: [{}, ...GET(3, { path: '/health' }), {}],
    statuses: [200, 200, 200, 200, 429],
    check: (o) => expect(o[1]!.ratelimit).toBeUndefined(),
  },
  {
    name: 'limits a controller method through the @RateLimit decorator',
    app: (s) => ({ routes: [{ method: 'GET', path: '/ctrl', decorated: { max: 2, window: '1m', ...s } }] }),
    steps: GET(3, { path: '/ctrl' }),
    statuses: [200, 200, 429],
    check: (o) => expect(o[2]).toMatchObject({ ratelimit: '"2-per-1m";r=0;t=60', retryAfter: '60' }),
  },
  {
    // A middleware reused on the app and on a route (Express, Koa) or one decorator at two layers of
    // a controller (fastify): counting twice would refuse the 2nd request and list the policy twice.
    name: 'one limiter mounted twice on a request path counts a request once',
    app: (s) => ({ routes: [{ method: 'GET', path: '/', mountedTwice: { max: 3, window: '1m', ...s } }] }),
    steps: GET(4),
    statuses: [200, 200, 200, 429],
    check: (o) => {
      expect(o.map((x) => x.policy)).toEqual(Array(4).fill('"3-per-1m";q=3;w=60'))
      expect(o.map((x) => x.ratelimit)).toEqual([
        '"3-per-1m";r=2;t=60',
        '"3-per-1m";r=1;t=60',
        '"3-per-1m";r=0;t=60',
        '"3-per-1m";r=0;t=60',
      ])
    },
  },
  {
    name: 'puts requests whose IP cannot be resolved in one logged bucket',
    app: (s) => ({ trustProxy: true, global: { max: 1, window: '1m', ...s }, routes: [{ method: 'GET', path: '/' }] }),
    steps: [
      { headers: { 'x-forwarded-for': 'not-an-ip' } },
      { headers: { 'x-forwarded-for': 'garbage' } },
      { headers: { 'x-forwarded-for': '198.51.100.9' } },
    ],
    statuses: [200, 429, 200],
    check: (_o, logs) => expect(logs.filter((l) => l.includes('could not resolve the client IP'))).toHaveLength(1),
  },
  {
    name: 'ignores X-Forwarded-For unless proxies are trusted',
    app: (s) => ({ global: { max: 1, window: '1m', ...s }, routes: [{ method: 'GET', path: '/' }] }),
    steps: [{ headers: { 'x-forwarded-for': '203.0.113.1' } }, { headers: { 'x-forwarded-for': '203.0.113.2' } }],
    statuses: [200, 429],
    check: (_o, logs) => expect(logs.filter((l) => l.includes('X-Forwarded-For'))).toHaveLength(1),
  },
  {
    name: 'locks a client out for blockDuration after it goes over its limit, whatever the window',
    app: (s) => ({
      global: {
        max: 5,
        window: '1m',
        blockDuration: '15m',
        skipSuccessfulRequests: true,
        requestWasSuccessful: () => false, // every request here is a failed login
        ...s,
      },
      routes: [{ method: 'GET', path: '/' }],
    }),
    steps: [...GET(6), { advance: 10 * 60_000 }, { advance: 5 * 60_000 }],
    statuses: [200, 200, 200, 200, 200, 429, 429, 200],
    check: (o) => {
      expect(o[5]).toMatchObject({ retryAfter: '900', ratelimit: '"5-per-1m";r=0;t=900' })
      expect(o[6]).toMatchObject({ retryAfter: '300' })
    },
  },
  {
    name: 'answers 403 with problem details and no quota headers for a client on the denyList, counting nothing',
    app: (s) => ({
      global: { max: 1, window: '1m', denyList: ['203.0.113.0/24', '2001:db8::/32'], ...s },
      routes: [{ method: 'GET', path: '/' }],
      trustProxy: true,
    }),
    steps: [
      ...GET(2, { headers: { 'x-forwarded-for': '203.0.113.9' } }),
      { headers: { 'x-forwarded-for': '2001:db8::5' } },
      ...GET(2, { headers: { 'x-forwarded-for': '192.0.2.1' } }),
    ],
    statuses: [403, 403, 403, 200, 429],
    check: (o) => {
      for (const r of o.slice(0, 3)) {
        expect([r.ratelimit, r.policy, r.retryAfter]).toEqual([undefined, undefined, undefined])
        expect(r.contentType).toBe('application/problem+json')
        expect(JSON.parse(r.body!)).toMatchObject({ title: 'Forbidden', status: 403 })
      }
    },
  },
  {
    name: 'never limits a client on the allowList, and sends it no headers',
    app: (s) => ({
      global: { max: 1, window: '1m', allowList: ['198.51.100.0/24'], ...s },
      routes: [{ method: 'GET', path: '/' }],
      trustProxy: true,
    }),
    steps: [...GET(3, { headers: { 'x-forwarded-for': '198.51.100.20' } }), ...GET(2, { headers: { 'x-forwarded-for': '192.0.2.1' } })],
    statuses: [200, 200, 200, 200, 429],
    check: (o) => {
      for (const r of o.slice(0, 3)) expect([r.ratelimit, r.policy]).toEqual([undefined, undefined])
    },
  },
  {
    name: 'sends no rate-limit header at all with headers: false and refusalHeaders: false, the 429 included',
    app: (s) => ({ global: { max: 1, window: '1m', headers: false, refusalHeaders: false, ...s }, routes: [{ method: 'GET', path: '/' }] }),
    steps: GET(2),
    statuses: [200, 429],
    check: (o) => {
      for (const r of o) expect([r.ratelimit, r.policy, r.retryAfter, r.cacheControl]).toEqual([undefined, undefined, undefined, undefined])
    },
  },
  {
    name: 'sends the quota fields only on refusals with headersOn: "refused"',
    app: (s) => ({ global: { max: 1, window: '1m', headersOn: 'refused', ...s }, routes: [{ method: 'GET', path: '/' }] }),
    steps: GET(2),
    statuses: [200, 429],
    check: (o) => {
      expect([o[0]!.ratelimit, o[0]!.policy]).toEqual([undefined, undefined])
      expect(o[1]).toMatchObject({
        ratelimit: '"1-per-1m";r=0;t=60',
        policy: '"1-per-1m";q=1;w=60',
        retryAfter: '60',
        cacheControl: 'no-store',
      })
    },
  },
  {
    name: 'checks several limits at once and lists each policy',
    app: (s) => ({
      global: {
        limits: [
          { max: 3, window: '1s' },
          { max: 4, window: '1m' },
        ],
        ...s,
      },
      routes: [{ method: 'GET', path: '/' }],
    }),
    steps: [...GET(4), { advance: 1000 }, ...GET(1)],
    statuses: [200, 200, 200, 429, 200, 429],
    check: (o) => {
      expect(o[0]!.policy).toBe('"3-per-1s";q=3;w=1, "4-per-1m";q=4;w=60')
      expect(o[5]!.ratelimit).toBe('"3-per-1s";r=2;t=1, "4-per-1m";r=0;t=59')
    },
  },
  // Each algorithm's statuses differ from what the fixed window would give, [200, 200, 200, 429,
  // 429, 429, 200], so an adapter that dropped `algorithm` (counting in fixed windows) fails here.
  // Four requests 0.25 s into a minute, two at 20.25 s, the last 0.05 s into the next minute: GCRA
  // has refilled one request by 20.25 s (T = 20 s) and more by then; at 60.05 s the sliding window
  // still weighs in almost all of the previous minute's three and the sliding log still holds them.
  ...(['sliding-window', 'gcra', 'sliding-log'] as const).map(
    (algorithm): Scenario => ({
      name: `limits with the ${algorithm} algorithm`,
      app: (s) => ({ global: { algorithm, max: 3, window: '1m', ...s }, routes: [{ method: 'GET', path: '/' }] }),
      steps: [...GET(4), { advance: 20_000 }, {}, { advance: 39_800 }],
      statuses: algorithm === 'gcra' ? [200, 200, 200, 429, 200, 429, 200] : [200, 200, 200, 429, 429, 429, 429],
      check: (o) => {
        expect(o[0]!.policy).toBe('"3-per-1m";q=3;w=60')
        expect(Number(o[3]!.retryAfter)).toBeGreaterThan(0)
      },
    }),
  ),
]
