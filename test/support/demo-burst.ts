import { rateLimit } from '@tollgate/express'
import express from 'express'
import request from 'supertest'

/*
 * The demo burst: 12 requests from one client at the start of a second against `max: 10`, the default
 * one-second window. Every adapter must give ten 200s and two 429s with the same RateLimit,
 * RateLimit-Policy and Retry-After fields and the same problem body as Express, the reference.
 */

export const BURST = 12
export const MAX = 10

/** A clock standing 5 ms into a window of `windowMs` (a second), so every request of a burst falls in one window. */
export function startOfSecond(windowMs = 1000): () => number {
  const now = Math.floor(Date.now() / windowMs) * windowMs + windowMs + 5
  return () => now
}

/** What a client sees of one response that must be the same on every adapter. */
export interface Seen {
  status: number
  ratelimit: string | null
  policy: string | null
  retryAfter: string | null
  cacheControl: string | null
  contentType: string | null
  /** The body of a refusal (an allowed response's body is the app's). */
  body: string | null
}

/** `Seen` from a response's status, a way to read its header fields (any case) and its body. */
export function seen(status: number, header: (name: string) => string | null | undefined, body: string): Seen {
  const refused = status !== 200
  const field = (name: string) => header(name) ?? null
  return {
    status,
    ratelimit: field('ratelimit'),
    policy: field('ratelimit-policy'),
    retryAfter: field('retry-after'),
    cacheControl: refused ? field('cache-control') : null,
    contentType: refused ? field('content-type') : null,
    body: refused ? body : null,
  }
}

/** The burst as Express answers it, with the same `clock`. */
export async function expressBurst(clock: () => number): Promise<Seen[]> {
  const app = express()
  app.use(rateLimit({ max: MAX, clock }))
  app.get('/', (_req, res) => void res.send('ok'))
  const out: Seen[] = []
  for (let i = 0; i < BURST; i++) {
    const r = await request(app).get('/')
    out.push(seen(r.status, (name) => r.headers[name] as string | undefined, r.text))
  }
  return out
}
