import { request } from 'node:http'
import { Limiter, MemoryStore, RedisStore, type Store } from '@tollgate/core'
import { keysWithoutTtl } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { close, listen } from '../support/http'
import { ADAPTERS, buildWith } from './fetch-apps'
import { gate, inFlightApp, inFlightScenario, until } from './in-flight'

// Algorithm "concurrency" over real HTTP in Express, Fastify and Koa: the slot of each request is
// released when its response ends or the client cuts it off (test/conformance/in-flight.ts).
const db = useRedis({ nodeRedis: true })

const stores: Array<[string, () => Store]> = [
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis through ioredis', () => new RedisStore({ client: db.client, timeout: '2s' })],
  ['Redis through node-redis', () => new RedisStore({ client: db.nodeRedis, timeout: '2s' })],
]

describe.each(stores)('a concurrency cap on the %s store', (storeName, makeStore) => {
  it.each(ADAPTERS)(
    '%s serves 3 of 10 parallel slow requests of one client at once, refuses 7 with 429, and frees slots on response end and on a client abort',
    async (framework) => {
      const g = gate()
      const spec = inFlightApp(makeStore(), g)
      const server = await buildWith(framework, spec)
      const url = await listen(server)
      try {
        await inFlightScenario(url, g)
      } finally {
        g.open()
        await close(server)
      }
      if (storeName !== 'memory') expect(await keysWithoutTtl(db.client, spec.global!.prefix!)).toEqual([])
    },
  )
})

/** A memory store whose admits (not its reads) wait until the test lets them answer, as a slow Redis would. */
class SlowStore extends MemoryStore {
  private waiting: Array<() => void> = []
  admitted = 0
  override admit(call: Parameters<MemoryStore['admit']>[0]): ReturnType<MemoryStore['admit']> {
    if (call.cost === 0) return super.admit(call)
    return new Promise<void>((resolve) => this.waiting.push(resolve)).then(() => {
      this.admitted++
      return super.admit(call)
    }) as unknown as ReturnType<MemoryStore['admit']>
  }
  get pending(): number {
    return this.waiting.length
  }
  answer(): void {
    for (const resolve of this.waiting.splice(0)) resolve()
  }
}

describe('a concurrency cap when the client leaves while the store answers', () => {
  it.each(ADAPTERS)('%s frees the slot of a request cut off before its decision came back', async (framework) => {
    const store = new SlowStore({ sweepIntervalMs: 0 })
    const g = gate()
    const spec = inFlightApp(store, g)
    const server = await buildWith(framework, spec)
    const url = await listen(server)
    const closed = new Promise<void>((resolve) => server.once('request', (req) => req.socket.once('close', () => resolve())))
    try {
      const req = request(`${url}/slow`, { agent: false })
      req.on('error', () => {})
      req.end()
      await until('the admit reaches the store', () => store.pending === 1)
      req.destroy()
      await closed // the server saw the client go before the store answered
      store.answer()
      await until('the admit answered', () => store.admitted === 1)
      // A second limiter on the app's prefix, only to read it (its warning about the shared prefix is expected).
      const quiet = { warn: () => {}, error: () => {} }
      const reader = new Limiter({ algorithm: 'concurrency', max: 3, store, prefix: spec.global!.prefix!, logger: quiet })
      await until('the slot released', async () => (await reader.peek('127.0.0.1')).remaining === 3)
      // The handler ran and still holds its request: no response ended, the slot was freed because the
      // response had closed before the decision came back.
      expect(g.inFlight).toBe(1)
    } finally {
      g.open()
      await close(server)
    }
  })
})
