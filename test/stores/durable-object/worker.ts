import { type DurableObjectNamespaceLike, type DurableObjectStateLike, DurableObjectStore, TollgateCounter } from '@tollgate/cloudflare'
import { type AlgorithmName, Limiter } from '@tollgate/core'

/*
 * The Worker the Durable Object store's tests run in workerd (test/harness/miniflare.ts): the counter an app
 * exports, two test doubles of it, and a fetch handler that decides requests as an app's Worker would.
 */

export { TollgateCounter }

/*
 * Until core's main entry is written for Web runtimes, its memory store (the limiter's fallback) calls
 * `unref()` on its sweep timer, which workerd's timers (numbers) lack: the Worker gives them one.
 */
const setIntervalOfWorkerd = globalThis.setInterval
globalThis.setInterval = ((...args: Parameters<typeof setInterval>) =>
  Object.assign(Object(setIntervalOfWorkerd(...args)), { unref() {} })) as unknown as typeof setInterval

/** A Durable Object that takes calls and answers none within any store's deadline. */
export class SilentCounter {
  async fetch(): Promise<Response> {
    await new Promise((resolve) => setTimeout(resolve, 30_000))
    return new Response(JSON.stringify({ error: 'too late' }))
  }
}

type InspectedState = DurableObjectStateLike & { storage: { list(): Promise<Map<string, unknown>> } }

/** The counter, whose storage keys a test can list (GET /keys): what it keeps, and what its alarm deletes. */
export class InspectedCounter extends TollgateCounter {
  private readonly state: InspectedState

  constructor(state: InspectedState, env: unknown) {
    super(state, env)
    this.state = state
  }

  override async fetch(request: Request): Promise<Response> {
    if (new URL(request.url).pathname !== '/keys') return super.fetch(request)
    return new Response(JSON.stringify([...(await this.state.storage.list()).keys()]))
  }
}

const limiters = new Map<string, Limiter>()

/** GET /consume?key=…&algorithm=…&max=…&prefix=…: one decision by a limiter on the store, as JSON. */
export default {
  async fetch(request: Request, env: { TOLLGATE: DurableObjectNamespaceLike }): Promise<Response> {
    const url = new URL(request.url)
    const q = (name: string) => url.searchParams.get(name) ?? ''
    const config = `${q('algorithm')} ${q('max')} ${q('prefix')}`
    let limiter = limiters.get(config)
    if (limiter === undefined) {
      const store = new DurableObjectStore({ namespace: env.TOLLGATE, timeout: '5s' })
      limiter = new Limiter({ max: Number(q('max')), window: '1m', algorithm: q('algorithm') as AlgorithmName, prefix: q('prefix'), store })
      limiters.set(config, limiter)
    }
    const decision = await limiter.consume(q('key'))
    return new Response(JSON.stringify({ allowed: decision.allowed, source: decision.source }))
  },
}
