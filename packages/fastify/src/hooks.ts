import { Limiter, type LimiterOptions } from '@tollgate/core'
import {
  type AdapterHooks,
  adapterFunction,
  createGate,
  type Decision,
  type Gate,
  isThenable,
  lowerHeaderName,
  type MaybePromise,
  type ResponseIO,
  recordDecision,
} from '@tollgate/core/adapter'
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'

export interface RateLimitOptions extends LimiterOptions<FastifyRequest> {
  /**
   * Where the limit runs: `"onRequest"`, before anything else (cheapest for the server), or
   * `"preHandler"`, after authentication hooks, so a `key` can read `request.user`.
   * @default "onRequest"
   */
  hook?: 'onRequest' | 'preHandler'
  /**
   * Sends the refusal yourself instead of the default body. Headers and the status code are already
   * set; send with `reply.send()` (returning the reply), or return the payload to send.
   */
  handler?: (request: FastifyRequest, reply: FastifyReply, decision: Decision) => unknown
}

/** A route's own limit (`config.rateLimit`): the plugin's options, plus `group`. */
export interface RouteRateLimitOptions extends RateLimitOptions {
  /**
   * Routes whose limits name the same group share one counter (one limit, built from the first such
   * route, so give them the same options), within the plugin that builds them. Unset, a route counts alone.
   * @default undefined
   */
  group?: string
}

/** Runs one limit: resolves to true when the request may go on, false once the refusal is sent. Throws what `check` throws. */
export type Run = Gate<FastifyRequest, FastifyReply, undefined>

// fastify keeps its constructor options under a private symbol and leaves trustProxy out of
// initialConfig; this only feeds a warning, so a fastify that moves it just loses the warning.
const trustOptions = new WeakMap<FastifyInstance, { value: unknown }>()
function trustProxyOption(server: FastifyInstance): unknown {
  let known = trustOptions.get(server)
  if (known === undefined) {
    known = { value: undefined }
    for (let o: object | null = server; o !== null; o = Object.getPrototypeOf(o)) {
      const symbol = Object.getOwnPropertySymbols(o).find((s) => s.description === 'fastify.options')
      if (symbol === undefined) continue
      known.value = (o as Record<symbol, { trustProxy?: unknown } | undefined>)[symbol]?.trustProxy
      break
    }
    trustOptions.set(server, known)
  }
  return known.value
}

const USE_ADDRESSES = `Fastify({ trustProxy: '<proxy IPs or CIDRs>' }) (e.g. '10.0.0.0/8', or '127.0.0.1' for a proxy on this host)`

function problem(request: FastifyRequest): string | null | undefined {
  // fastify defines request.ips only when trustProxy is set (reading it parses X-Forwarded-For, so
  // this runs until the setup is known: null stops further checks).
  if (request.ips === undefined) {
    if (request.headers['x-forwarded-for'] === undefined) return undefined
    return `a request carried X-Forwarded-For but fastify does not trust proxies, so every client behind the proxy shares one limit; trust your proxies' addresses: ${USE_ADDRESSES}.`
  }
  const trust = trustProxyOption(request.server)
  // true makes request.ip the leftmost X-Forwarded-For entry, which any client can write, even through
  // a proxy that appends to the header. The proxies' addresses say the same for honest
  // traffic, so this is warned at the first request.
  if (trust === true) {
    return `the fastify trustProxy option is true, so request.ip is the leftmost X-Forwarded-For entry, which any client can write: a client that varies it is never limited. Trust only your proxies' addresses: ${USE_ADDRESSES}.`
  }
  // fastify 5.12.1 dropped hop counts (they cannot check who sent the header): a number now trusts
  // no proxy, and request.ip stays the proxy's own address. Earlier 5.x honour it.
  if (typeof trust === 'number') {
    if (request.headers['x-forwarded-for'] === undefined) return undefined
    if (request.ip !== request.socket.remoteAddress) return null
    return `the fastify trustProxy option is a hop count (${trust}), which this fastify ignores (5.12.1 and later), so request.ip is the proxy's address and every client behind the proxy shares one limit; trust your proxies' addresses instead: ${USE_ADDRESSES}.`
  }
  return null
}

/** Adapter hooks for a group of limiters (a plugin and its route limits) that report a misconfiguration once between them. */
export function adapterHooks(): AdapterHooks<FastifyRequest> {
  let reported = false
  return {
    ip: (request) => request.ip,
    diagnose(request) {
      if (reported) return null
      const found = problem(request)
      reported = found !== undefined
      return found
    },
  }
}

/** Fastify's side of the response sequence (core's adapter.ts runs it). */
const io: ResponseIO<FastifyRequest, FastifyReply> = {
  record: (request, _reply, decision) => recordDecision(request, decision),
  // reply.header per field, not reply.headers(record): no Object.keys array, and names already in
  // lower case, so fastify's toLowerCase builds no new string.
  setHeaders(reply, headers) {
    for (const name in headers) reply.header(lowerHeaderName(name), headers[name]!)
  },
  status: (reply, code) => void reply.code(code),
  // The bytes, not the string: fastify appends "; charset=utf-8" to a JSON-like type sent as a string,
  // and the refusal should read the same in every adapter.
  send(reply, rejection) {
    reply.header('content-type', rejection.contentType).send(rejection.bytes)
  },
  raw: (reply) => reply.raw,
  // inject() ends a response without writing it anywhere, so writableFinished stays false on 'close'
  // and every response would read as cut off. 'finish' means finished under real HTTP and
  // inject() alike, and comes before inject() resolves, so a test's next request sees the refund.
  completion(reply, done) {
    const raw = reply.raw
    // Cut off while the store answered: closed already, and it will not close again.
    if (raw.destroyed) return done(500)
    const over = (): void => {
      raw.removeListener('finish', over)
      raw.removeListener('close', over)
      // 'finish' leaves the response whole; a 'close' that comes first is a response cut off (as core reads it).
      done(raw.destroyed && !raw.writableFinished ? 500 : raw.statusCode)
    }
    raw.once('finish', over)
    raw.once('close', over)
  },
}

/** Builds the limiter for `options` (validating them) and the function that applies it to a request. */
export function limit(
  options: RateLimitOptions | undefined,
  adapterKeys: readonly string[],
  hooks = adapterHooks(),
): { limiter: Limiter<FastifyRequest>; run: Run } {
  const limiter = new Limiter<FastifyRequest>(options, hooks, adapterKeys)
  const handler = adapterFunction<NonNullable<RateLimitOptions['handler']>>('handler', options?.handler)
  // The handler may send with reply.send() or return the payload to send.
  const sendReturned = (reply: FastifyReply, value: unknown): void => {
    if (value !== undefined && !reply.sent) reply.send(value)
  }
  const run = createGate(
    limiter,
    io,
    handler &&
      ((request: FastifyRequest, reply: FastifyReply, decision: Decision) => {
        const value = handler(request, reply, decision)
        return isThenable(value) ? value.then((v) => sendReturned(reply, v)) : sendReturned(reply, value)
      }),
  )
  return { limiter, run }
}

/**
 * A callback-style hook: it calls `done` only when the request may go on, so a refusal stops the
 * chain right there (not through fastify's error path), and a sync decision allocates no promise.
 */
export function asHook(run: Run) {
  return function rateLimitHook(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    let go: MaybePromise<boolean>
    try {
      go = run(request, reply, undefined)
    } catch (error) {
      done(error as Error)
      return
    }
    if (isThenable(go)) go.then((ok) => ok && done(), done)
    else if (go) done()
  }
}
