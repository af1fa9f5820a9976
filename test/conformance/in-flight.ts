import { request } from 'node:http'
import type { Store } from '@tollgate/core'
import { testPrefix } from '../harness/redis'
import { get, type Reply } from '../support/http'
import { sleep } from '../support/time'
import type { AppSpec } from './apps'

/**
 * The concurrency cap over real HTTP, one scenario for every adapter: a client's slow requests are
 * held in the handler until the test lets them end, so "in flight" is a fact the test controls, not
 * a matter of timing.
 */

/** A slow handler's gate: requests wait in `hold` until `open`; `inFlight` counts those waiting, `peak` the most at once. */
export interface Gate {
  hold: () => Promise<void>
  open(): void
  inFlight: number
  peak: number
}

export function gate(): Gate {
  let waiting: Array<() => void> = []
  const g: Gate = {
    inFlight: 0,
    peak: 0,
    hold: () =>
      new Promise<void>((resolve) => {
        g.inFlight++
        g.peak = Math.max(g.peak, g.inFlight)
        waiting.push(() => {
          g.inFlight--
          resolve()
        })
      }),
    open() {
      const all = waiting
      waiting = []
      for (const end of all) end()
    },
  }
  return g
}

/** A request in flight: its reply (or "aborted"), and a way to cut it off from the client's side. */
interface Sent {
  reply: Promise<Reply | 'aborted'>
  settled: boolean
  abort(): void
}

function send(url: string): Sent {
  const sent: Sent = { reply: Promise.resolve('aborted'), settled: false, abort: () => {} }
  sent.reply = new Promise((resolve) => {
    const req = request(url, { agent: false, timeout: 10_000 }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        body += chunk
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
      res.on('error', () => resolve('aborted'))
    })
    req.on('error', () => resolve('aborted'))
    req.end()
    sent.abort = () => req.destroy()
  }).finally(() => {
    sent.settled = true
  }) as Promise<Reply | 'aborted'>
  return sent
}

/** Waits (bounded) until `done` holds: for what happens on another socket or in the store, never a speed. */
export async function until(what: string, done: () => boolean | Promise<boolean>, withinMs = 5000): Promise<void> {
  const end = Date.now() + withinMs
  while (!(await done())) {
    if (Date.now() > end) throw new Error(`still waiting after ${withinMs} ms: ${what}`)
    await sleep(10)
  }
}

const statusesOf = (replies: Array<Reply | 'aborted'>) => {
  const counts: Record<string, number> = {}
  for (const r of replies) {
    const key = r === 'aborted' ? 'aborted' : String(r.status)
    counts[key] = (counts[key] ?? 0) + 1
  }
  return counts
}

/** The app of the scenario: a concurrency cap of 3 per client, a slow route and a fast one. */
export function inFlightApp(store: Store, g: Gate): AppSpec {
  return {
    global: { algorithm: 'concurrency', max: 3, window: '1m', store, prefix: testPrefix('in-flight') },
    routes: [
      { method: 'GET', path: '/slow', hold: g.hold },
      { method: 'GET', path: '/' },
    ],
  }
}

/**
 * 10 parallel slow requests of one client with max 3: exactly 3 served at once, the other 7 refused at
 * once with a concurrency limit's fields; the slots free when those 3 responses end (3 more are
 * admitted), and when a client cuts its request off (one more, while its handler still runs).
 */
export async function inFlightScenario(url: string, g: Gate): Promise<void> {
  const ten = Array.from({ length: 10 }, () => send(`${url}/slow`))
  await until('7 refusals and 3 requests in the handler', () => ten.filter((s) => s.settled).length === 7 && g.inFlight === 3)
  const refused = (await Promise.all(ten.filter((s) => s.settled).map((s) => s.reply))) as Reply[]
  expect(refused.map((r) => r.status)).toEqual(Array(7).fill(429))
  expect(refused[0]!.headers).toMatchObject({
    'retry-after': '1',
    'ratelimit-policy': '"3-concurrent";q=3;qu="concurrent-requests"',
    ratelimit: '"3-concurrent";r=0;t=1',
  })
  g.open()
  expect(statusesOf(await Promise.all(ten.map((s) => s.reply)))).toEqual({ 200: 3, 429: 7 })
  expect(g.peak).toBe(3)

  // The three responses ended: their slots are free, so three slow requests are admitted again, and a fourth is not.
  const three = Array.from({ length: 3 }, () => send(`${url}/slow`))
  await until('3 requests in the handler again', () => g.inFlight === 3)
  expect((await get(`${url}/`)).status).toBe(429)

  // A client cuts its request off while its handler still runs: the slot frees on the close, not when the handler ends.
  three[0]!.abort()
  await until('a slot freed by the cut-off request', async () => (await get(`${url}/`)).status === 200)
  expect(g.inFlight).toBe(3)
  const fourth = send(`${url}/slow`)
  await until('the freed slot taken', () => g.inFlight === 4)
  expect((await get(`${url}/`)).status).toBe(429)

  g.open()
  expect(statusesOf(await Promise.all([...three, fourth].map((s) => s.reply)))).toEqual({ 200: 3, aborted: 1 })
  // Every slot is free once every response ended.
  const after = Array.from({ length: 3 }, () => send(`${url}/slow`))
  await until('3 requests in the handler after all ended', () => g.inFlight === 3)
  g.open()
  expect(statusesOf(await Promise.all(after.map((s) => s.reply)))).toEqual({ 200: 3 })
}
