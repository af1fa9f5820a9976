// One of the processes of the lease test (lease-processes.test.ts): floods one key through a limiter with
// `lease` on the BUILT core, from START_AT for DURATION_MS at RATE requests a second, and sends the parent
// the requests it admitted per window. Talks only to the test's own redis-server on 127.0.0.1.

import { Limiter, RedisStore } from '@tollgate/core'
import { Redis } from 'ioredis'

const { REDIS_URL, PREFIX, MAX, WINDOW_MS, RATE, START_AT, DURATION_MS } = process.env
const windowMs = Number(WINDOW_MS)
const client = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
client.on('error', () => {})
const limiter = new Limiter({
  max: Number(MAX),
  window: windowMs,
  prefix: PREFIX,
  lease: true,
  logger: { warn() {}, error() {} },
  store: new RedisStore({ client }),
})
limiter.on('storeError', () => {})

const admitted = {}
const sources = {}
let pending = 0
const TICK_MS = 5
const perTick = Math.max(1, Math.round((Number(RATE) * TICK_MS) / 1000))
const end = Number(START_AT) + Number(DURATION_MS)

function record(d) {
  sources[d.source] = (sources[d.source] ?? 0) + 1
  if (!d.allowed) return
  const w = Math.floor(d.at / windowMs)
  admitted[w] = (admitted[w] ?? 0) + 1
}

async function run() {
  await new Promise((r) => setTimeout(r, Math.max(0, Number(START_AT) - Date.now())))
  let next = Date.now()
  while (Date.now() < end) {
    // At most a second's worth in flight: a stalled Redis never piles up requests without bound.
    for (let i = 0; i < perTick && pending < Number(RATE); i++) {
      pending++
      Promise.resolve(limiter.consume('hot'))
        .then(record, () => {})
        .finally(() => pending--)
    }
    next += TICK_MS
    await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())))
  }
  const deadline = Date.now() + 2000
  while (pending > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
  await limiter.close().catch(() => {})
  process.send({ admitted, sources }, () => {
    client.disconnect()
    process.exit(0)
  })
}
run()
