import { BURST, expressBurst, MAX, type Seen, seen, startOfSecond } from '../support/demo-burst'
import { get, type Reply } from '../support/http'
import { sleep } from '../support/time'
import { type RuntimeServer, runtimeVersion, startServer } from './runtimes'

/*
 * The demo burst on the real runtimes: `withRateLimit(handler, { max: 10 })` from the built @tollgate/web
 * served by Bun.serve and by Deno.serve (test/runtimes/fixtures), twelve requests over HTTP from 127.0.0.1.
 *
 * The runtime's clock is real, so the burst is sent right after a second begins, and a burst that still
 * straddled two windows (a stalled machine) is sent again at the next second: within one window every
 * field is what Express gives with its clock standing 5 ms into a window (t=1 and Retry-After: 1 hold
 * for the whole second, as the reset is under a second away). What differs by nature (Date, Connection,
 * Content-Length of the 200s, the 200s' bodies) is not compared; the 200s' bodies are checked on their own:
 * the key the request was counted under, the client IP the runtime gave.
 */

const ATTEMPTS = 3

/** The burst, sent one request after another from the start of a second, within one second of the clock. */
async function burstInOneSecond(url: string): Promise<Reply[]> {
  for (let attempt = 1; ; attempt++) {
    await sleep(1000 - (Date.now() % 1000) + 5)
    const second = Math.floor(Date.now() / 1000)
    const replies: Reply[] = []
    for (let i = 0; i < BURST; i++) replies.push(await get(url))
    if (Math.floor(Date.now() / 1000) === second) return replies
    if (attempt === ATTEMPTS) throw new Error(`${ATTEMPTS} bursts in a row took past the end of their second: the machine stalled`)
  }
}

describe.each((['bun', 'deno'] as const).map((runtime) => [runtimeVersion(runtime), runtime] as const))(
  'the demo burst on %s',
  (_version, runtime) => {
    let server: RuntimeServer | undefined
    beforeAll(async () => {
      server = await startServer(runtime)
    })
    afterAll(() => server?.stop())

    it('answers ten 200s and two 429s with the fields and the problem body Express gives, keyed by the client IP', async () => {
      const express = await expressBurst(startOfSecond())
      const replies = await burstInOneSecond(server!.url)
      const answered: Seen[] = replies.map((r) => seen(r.status, (name) => r.headers[name] as string | undefined, r.body))
      expect(answered.map((s) => s.status)).toEqual([...Array(MAX).fill(200), 429, 429])
      expect(answered[0]).toMatchObject({ ratelimit: '"10-per-1s";r=9;t=1', policy: '"10-per-1s";q=10;w=1' })
      expect(answered[BURST - 1]).toMatchObject({ retryAfter: '1', cacheControl: 'no-store', contentType: 'application/problem+json' })
      expect(answered).toEqual(express)
      expect(replies.slice(0, MAX).map((r) => r.body)).toEqual(Array(MAX).fill('127.0.0.1'))
    })
  },
)
