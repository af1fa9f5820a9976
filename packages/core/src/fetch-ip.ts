/*
 * The client IP of a Fetch API request, for the adapters that serve `(request, ...) => Response`
 * (@tollgate/web, @tollgate/hono). A Request carries no socket: each runtime hands the peer's address
 * over in its own way, next to the request, and none of them in the request itself.
 */

/** The part of a Request read here. */
interface HeadersOf {
  readonly headers: { get(name: string): string | null }
}

/** What Bun.serve passes its fetch handler second: the server, which knows each request's peer. */
type BunServer = { requestIP(request: unknown): { address?: string } | null | undefined }
/** What Deno.serve passes its handler second: the connection's info. */
type DenoInfo = { remoteAddr: { hostname?: string } }
/** What @hono/node-server passes second, as `env`: Node's request and response, under a Fetch API bridge. */
type NodeBridge = { incoming: { socket?: { remoteAddress?: string } | null } }

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null

/**
 * On Cloudflare's runtime (workerd), CF-Connecting-IP is the client's address as Cloudflare's edge saw it,
 * set by the edge on every request: a client cannot choose it there. Anywhere else it is just a header
 * a client may send, so it is read on workerd only, which names itself in navigator.userAgent.
 */
const onWorkerd = (): boolean => (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === 'Cloudflare-Workers'

/**
 * The client IP the runtime gives with `request`, from what it passed the handler next to it (`env`:
 * Bun's server, Deno's info, Node's request under @hono/node-server), or on workerd from
 * CF-Connecting-IP. Undefined where the runtime gives none (a Next.js route handler).
 */
export function runtimeIp(request: HeadersOf, env: unknown): string | undefined {
  // First: a Worker's env holds the app's bindings, whose names are the app's to choose.
  if (onWorkerd()) return request.headers.get('cf-connecting-ip') ?? undefined
  if (!isObject(env)) return undefined
  if (typeof env.requestIP === 'function') return (env as BunServer).requestIP(request)?.address ?? undefined
  if (isObject(env.remoteAddr)) return (env as DenoInfo).remoteAddr.hostname ?? undefined
  if (isObject(env.incoming)) return (env as NodeBridge).incoming.socket?.remoteAddress ?? undefined
  return undefined
}

/**
 * The client's address in X-Forwarded-For behind `hops` proxies that each append the address they saw
 * (the nearest last): the entry `hops` from the end, which the client cannot write; the first entry
 * when there are fewer, as Express's hop count reads it. Undefined without the header.
 */
export function forwardedIp(request: HeadersOf, hops: number): string | undefined {
  const header = request.headers.get('x-forwarded-for')
  if (header === null) return undefined
  const entries = header
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
  return entries[Math.max(0, entries.length - hops)]
}
