import { randomUUID } from 'node:crypto'
import { type Decision, Limiter, RedisStore } from '@tollgate/core'
import { clockInOneWindow, sleep } from '../support/time'
import { ownRedis } from './support'

// After one fallback, the decisions that come from Redis again must carry the count Redis returned:
// the decision is made from the count the increment returned, with nothing added on the way. 20
// clients at 8 of 10; one request falls back while Redis is frozen past the store's deadline (its
// INCRBY still runs once Redis thaws, so Redis and the fallback counted the same requests); then
// every client sends requests that Redis counts, two in one event-loop turn (merged into one INCRBY)
// and one in the next, and each decision's count is checked against the values Redis holds.
const CLIENTS = 20
const MAX = 10
const BEFORE = 8
const WINDOW_MS = 60_000
const TIMEOUT_MS = 300
// Redis held this long (well within the deadline) so that two transactions' replies arrive in one read.
const HOLD_MS = 30
// The circuit stays open 1 s after the failure (resilience.ts); past it, decisions come from Redis.
const CIRCUIT_MS = 1100

const redis = ownRedis()

describe.each([
  ['through the client', 'client'],
  ['written directly onto the client’s connection', 'direct'],
  ['on the store’s own connection', 'own-connection'],
] as const)('after one fallback, Redis’s decisions carry Redis’s count (%s)', (_name, transport) => {
  it(`gives every client the counts Redis returned, merged requests included (${CLIENTS} clients at ${BEFORE} of ${MAX})`, async () => {
    const prefix = `fbcount-${randomUUID()}:`
    const limiter = new Limiter({
      max: MAX,
      window: WINDOW_MS,
      prefix,
      store: new RedisStore({ client: redis.client, timeout: TIMEOUT_MS, transport }),
      clock: clockInOneWindow(WINDOW_MS),
      logger: redis.logger,
    })
    const fallbacks: Decision[] = []
    limiter.on('fallback', (d) => fallbacks.push(d as Decision))
    const client = (i: number) => `client-${i}`

    // Every client at 8 of 10, counted by Redis, one request at a time.
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, i) => {
        for (let n = 0; n < BEFORE; n++) {
          const d = await limiter.consume(client(i))
          expect([d.source, d.count]).toEqual(['store', n + 1])
        }
      }),
    )

    // One fallback: client 0's 9th request meets a frozen Redis and is decided by the fallback.
    redis.server.freeze()
    let stalled: Decision
    try {
      stalled = await limiter.consume(client(0))
    } finally {
      redis.server.thaw()
    }
    expect([stalled.source, stalled.allowed, stalled.count]).toEqual(['fallback', true, BEFORE + 1])
    expect(fallbacks).toHaveLength(1)
    await sleep(CIRCUIT_MS)

    // Redis back. Each client sends two requests in one turn (merged into one INCRBY) and one more in
    // the next turn (the next transaction), while Redis is held for a moment shorter than the deadline,
    // so that both transactions' replies arrive together, as they do under load.
    redis.server.freeze()
    let decisions: Decision[]
    try {
      const merged = Array.from({ length: CLIENTS * 2 }, (_, n) => limiter.consume(client(n % CLIENTS)))
      await sleep(5) // past the batch's flush (setImmediate)
      const next = Array.from({ length: CLIENTS }, (_, i) => limiter.consume(client(i)))
      await sleep(HOLD_MS)
      redis.server.thaw()
      decisions = await Promise.all([...merged, ...next])
    } finally {
      redis.server.thaw()
    }
    expect(fallbacks).toHaveLength(1)

    // Per client, in the order Redis counted them (the merged pair, then the next one): the counts
    // Redis returned, ending at the count it holds. Client 0's stalled INCRBY ran once Redis thawed,
    // so its counts start one higher.
    const held = new Map<string, number>()
    for (const key of await redis.client.keys(`${prefix}*`))
      held.set(key.slice(key.indexOf('{') + 1, key.indexOf('}')), Number(await redis.client.get(key)))
    const seen = (i: number) => {
      const mine = [decisions[i]!, decisions[CLIENTS + i]!, decisions[2 * CLIENTS + i]!]
      return { held: held.get(client(i)), decisions: mine.map((d) => [d.source, d.count, d.remaining, d.allowed]) }
    }
    const expected = (i: number) => {
      const first = BEFORE + (i === 0 ? 2 : 1)
      const counts = [first, first + 1, first + 2]
      return { held: first + 2, decisions: counts.map((n) => ['store', n, Math.max(0, MAX - n), n <= MAX]) }
    }
    for (let i = 0; i < CLIENTS; i++) expect({ client: client(i), ...seen(i) }).toEqual({ client: client(i), ...expected(i) })
  })
})
