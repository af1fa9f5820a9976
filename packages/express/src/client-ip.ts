/*
 * `req.ip` as Express resolves it, without Express's getter: for this package's middleware, and for
 * @tollgate/nestjs on platform-express (through "@tollgate/express/internal"). Express's getter runs
 * proxy-addr on every read: it splits X-Forwarded-For into a new array and asks the `trust proxy`
 * function about the socket's address, which for an address list ('loopback', '10.0.0.0/8')
 * validates and parses that address again, a cost larger than the limiter's own work
 * (bench/express-ip.mjs). Here the same addresses are walked in the same order and the same trust
 * function decides, but the socket's address, the proxy's for every request it forwards, is asked
 * about once.
 */

/**
 * The parts of an Express request read here, typed structurally: @tollgate/nestjs loads this file on
 * platform-fastify too, where neither Express nor its types need be installed.
 */
interface Request {
  readonly ip?: string
  readonly app?: { get?(name: string): unknown }
  readonly headers: Record<string, string | string[] | undefined>
  readonly socket?: { readonly remoteAddress?: string } | null
  readonly connection?: { readonly remoteAddress?: string } | null
}

type Trust = (address: string, hop: number) => boolean

/**
 * What Express's own `ip` getter (4.x and 5.x) does: `proxyaddr(this, this.app.get('trust proxy fn'))`.
 * Its source text is what tells Express's getter from one an app or a library put in its place on
 * Express's request prototype (whose `req.ip` must then be read as it is). Identity would need the
 * getter of the Express that built the app, which this package cannot import: Express is only a type
 * here (a Nest app on fastify has none installed), and the app's copy of Express may not be the one
 * this package would resolve (two majors side by side, a framework's own pinned copy).
 */
const EXPRESS_GETTER = /^function ip\s*\(\)\s*\{\s*var trust = this\.app\.get\('trust proxy fn'\);\s*return proxyaddr\(this, trust\);\s*\}$/

/** Request prototypes (an app's `app.request`) known to inherit Express's own getter, or known not to. */
const getters = new WeakMap<object, boolean>()
/** The prototype of the last request resolved here: a server's requests nearly all share one. */
let lastPrototype: object | undefined

/** True when `ip` on requests of this prototype is Express's getter, found where Express defines it. */
function inheritsExpressGetter(prototype: object): boolean {
  for (let o: object | null = prototype; o !== null; o = Object.getPrototypeOf(o)) {
    const own = Object.getOwnPropertyDescriptor(o, 'ip')
    if (own === undefined) continue
    // Express's request prototype is the one with `accepts`; an `ip` defined anywhere else (an app
    // that overrides it on `app.request`) is the app's, and is read as it is.
    return typeof own.get === 'function' && Object.hasOwn(o, 'accepts') && EXPRESS_GETTER.test(Function.prototype.toString.call(own.get))
  }
  return false
}

function hasExpressGetter(req: object): boolean {
  const prototype: object | null = Object.getPrototypeOf(req)
  if (prototype === null) return false
  if (prototype === lastPrototype) return true
  let known = getters.get(prototype)
  if (known === undefined) {
    known = inheritsExpressGetter(prototype)
    getters.set(prototype, known)
  }
  if (known) lastPrototype = prototype
  return known
}

/** Trust functions Express compiled from a setting (not the app's own function), each with its verdicts on socket addresses. */
const verdicts = new WeakMap<Trust, Map<string, boolean>>()
let lastTrust: Trust | undefined
let lastVerdicts: Map<string, boolean> | undefined
/** Socket addresses remembered per trust function: proxies are few; past it (clients sending the header straight) it starts over. */
const MAX_VERDICTS = 1024

/**
 * Whether `trust` trusts the socket's address (hop 0). Express compiles a setting (true, a hop count,
 * addresses) into a function whose verdict depends on its arguments alone, so it is remembered; an
 * app's own function (`app.set('trust proxy', fn)`) is asked every time, as proxy-addr asks it.
 */
function trustsSocket(trust: Trust, compiled: boolean, address: string): boolean {
  if (!compiled) return Boolean(trust(address, 0))
  let known = trust === lastTrust ? lastVerdicts : verdicts.get(trust)
  if (known === undefined) {
    known = new Map()
    verdicts.set(trust, known)
  }
  lastTrust = trust
  lastVerdicts = known
  let verdict = known.get(address)
  if (verdict === undefined) {
    verdict = Boolean(trust(address, 0))
    if (known.size >= MAX_VERDICTS) known.clear()
    known.set(address, verdict)
  }
  return verdict
}

/**
 * The client address Express's `req.ip` gives this request. Where `ip` is not Express's own getter
 * (an app that defines its own, a request that is not Express's) it is read as it is.
 */
export function expressIp(req: Request): string | undefined {
  if (Object.hasOwn(req, 'ip') || !hasExpressGetter(req)) return req.ip
  const app = req.app
  const trust = app?.get?.('trust proxy fn')
  const header = req.headers['x-forwarded-for']
  const socket = req.socket ?? req.connection
  const address = socket?.remoteAddress
  // What proxy-addr would throw on, or read differently: left to it.
  if (typeof trust !== 'function' || typeof address !== 'string' || (header !== undefined && typeof header !== 'string')) return req.ip
  if (header === undefined || header === '') return address
  const compiled = typeof app!.get!('trust proxy') !== 'function'
  // One address with no spaces, the common case, is the header itself; otherwise the header's
  // addresses, nearest hop first, as the `forwarded` package splits them (at commas, spaces trimmed
  // from each end, empty entries dropped). proxy-addr asks about the socket only when there is one.
  if (header.indexOf(',') === -1 && header.indexOf(' ') === -1) return trustsSocket(trust as Trust, compiled, address) ? header : address
  const hops = forwardedFor(header)
  if (hops.length === 0 || !trustsSocket(trust as Trust, compiled, address)) return address
  let client = hops[0]!
  for (let i = 1; i < hops.length; i++) {
    if (!(trust as Trust)(client, i)) return client
    client = hops[i]!
  }
  return client
}

/** X-Forwarded-For's addresses, the last (the nearest hop) first: the `forwarded` package's parse. */
function forwardedFor(header: string): string[] {
  const list: string[] = []
  let end = header.length
  let start = header.length
  for (let i = header.length - 1; i >= 0; i--) {
    const c = header.charCodeAt(i)
    if (c === 0x20) {
      if (start === end) start = end = i
    } else if (c === 0x2c) {
      if (start !== end) list.push(header.substring(start, end))
      start = end = i
    } else start = i
  }
  if (start !== end) list.push(header.substring(start, end))
  return list
}
