// Shared plumbing for the benchmark servers: argument parsing, the Redis client, READY, and
// shutting down when the runner goes away. Nothing here runs on the request path.
import { realpathSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { importFrom } from '../lib/baseline.mjs'

let tollgateFrom = '' // --tollgate-from DIR: import Tollgate from that tree (a baseline), not this one

export function serverArgs() {
  const { values } = parseArgs({
    options: {
      case: { type: 'string' },
      port: { type: 'string' },
      max: { type: 'string', default: '1000000000' },
      'window-ms': { type: 'string', default: '1000' },
      redis: { type: 'string', default: '' },
      prefix: { type: 'string', default: 'bench:' },
      'tollgate-from': { type: 'string', default: '' },
    },
  })
  if (!values.case || !values.port) {
    fail('usage: node <server>.mjs --case <name> --port <port> [--max N] [--window-ms MS] [--redis URL] [--prefix P] [--tollgate-from DIR]')
  }
  tollgateFrom = values['tollgate-from']
  return {
    caseName: values.case,
    port: Number(values.port),
    max: Number(values.max),
    windowMs: Number(values['window-ms']),
    redisUrl: values.redis,
    prefix: values.prefix,
  }
}

/** True when the module at `url` is the script node was started with (not imported). */
export function isMain(url) {
  try {
    return url === pathToFileURL(realpathSync(process.argv[1])).href
  } catch {
    return false
  }
}

/** Print a reason the runner can show, then exit with code 3 ("case skipped"). */
export function skip(reason) {
  process.stdout.write(`SKIP ${reason.replace(/\s+/g, ' ')}\n`)
  process.exit(3)
}

export function fail(message) {
  process.stderr.write(`${message}\n`)
  process.exit(2)
}

let redisClient
/** One ioredis client per server process, created on first use and checked with PING before READY. */
export async function redis(url) {
  if (redisClient) return redisClient
  if (!url) fail('this case needs --redis <url>')
  const { Redis } = await import('ioredis')
  redisClient = new Redis(url, { lazyConnect: true })
  redisClient.on('error', (err) => process.stderr.write(`redis client error: ${err.message}\n`))
  await redisClient.connect()
  await redisClient.ping()
  return redisClient
}

/**
 * Import a Tollgate adapter, or skip the case with a note saying why (usually: not built yet). With
 * --tollgate-from DIR the adapter (and through it, its core) comes from the tree in DIR.
 */
export async function importTollgate(framework) {
  const name = `@tollgate/${framework}`
  let mod
  try {
    mod = tollgateFrom ? (await importFrom(name, tollgateFrom)).mod : await import(name)
  } catch (err) {
    const where = tollgateFrom ? ` from ${tollgateFrom}` : ''
    skip(
      `${name} could not be imported${where} (${err.code ?? err.message}); run \`npm run build\`${tollgateFrom ? ` in ${tollgateFrom}` : ''} (and \`npm install\` if node_modules/@tollgate/${framework} is missing)`,
    )
  }
  const missing = ['rateLimit', 'RedisStore'].filter((k) => typeof mod[k] !== 'function')
  if (missing.length) skip(`${name} does not export ${missing.join(' and ')} yet (built from a stub?)`)
  return mod
}

export function ready(server, caseName) {
  // The runner waits for this exact line.
  process.stdout.write(`READY ${caseName} pid=${process.pid}\n`)
  const stop = () => {
    try {
      server.close?.()
    } catch {}
    try {
      redisClient?.disconnect()
    } catch {}
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  // The runner holds our stdin open; if it dies (even by SIGKILL), stdin ends and so do we.
  process.stdin.on('end', stop)
  process.stdin.on('error', stop)
  process.stdin.resume()
}

export const BODY = { ok: true }

/**
 * The floor: what any IP-keyed limiter that shows its quota must do, with no limiting logic. It reads
 * the client IP through the framework, sets the same two IETF header fields Tollgate sets, and once
 * `max` requests have passed (one global counter, no key, no window), answers with exactly Tollgate's
 * refusal: the same four header fields and the same problem-details body. Measured next to Tollgate,
 * it shows how much of a limiter's cost is the response itself rather than the deciding.
 */
export function floorResponses(max, windowMs) {
  const unit = windowMs % 60_000 === 0 ? `${windowMs / 60_000}m` : windowMs % 1000 === 0 ? `${windowMs / 1000}s` : `${windowMs}ms`
  const name = `${max}-per-${unit}`
  const w = Math.max(1, Math.ceil(windowMs / 1000))
  const policy = `"${name}";q=${max};w=${w}`
  const ok = { 'RateLimit-Policy': policy, RateLimit: `"${name}";r=${max - 1};t=${w}` }
  const refused = { 'RateLimit-Policy': policy, RateLimit: `"${name}";r=0;t=${w}`, 'Retry-After': String(w), 'Cache-Control': 'no-store' }
  const body = JSON.stringify({
    type: 'about:blank',
    title: 'Too Many Requests',
    status: 429,
    detail: `Too many requests: the limit is ${max} per ${unit}. Retry after the number of seconds in the Retry-After header.`,
  })
  let seen = 0
  return { name, policy, ok, refused, body, contentType: 'application/problem+json', over: () => ++seen > max }
}

/**
 * The minimal limiter: the least a correct per-client fixed-window limiter that shows its real quota
 * does, written by hand for this bench. One Map entry per client holding its count and the window
 * it counts in (reset in place when the window turns), so a request is one lookup and one add; the
 * `RateLimit` value built per request from the count left; the floor's refusal with its `t` and
 * `Retry-After` for the current second. No options, no store interface, no bound on memory, no
 * failure handling: it is the reference for what a per-client limit costs on top of the floor, which
 * keeps one global counter and writes constant values.
 */
export function minimalLimiter(max, windowMs) {
  const f = floorResponses(max, windowMs)
  const head = `"${f.name}";r=`
  const counts = new Map()
  let t = 1
  let refusedFor = 0
  let refused = f.refused
  return {
    policy: f.policy,
    body: f.body,
    contentType: f.contentType,
    /** Counts one request of `ip`; the `RateLimit` value for an allowed one, or undefined when refused. */
    take(ip) {
      const now = Date.now()
      const index = Math.floor(now / windowMs)
      let entry = counts.get(ip)
      if (entry === undefined) {
        entry = { n: 0, index }
        counts.set(ip, entry)
      } else if (entry.index !== index) {
        entry.n = 0
        entry.index = index
      }
      const n = ++entry.n
      t = Math.ceil(((index + 1) * windowMs - now) / 1000)
      return n <= max ? `${head}${max - n};t=${t}` : undefined
    },
    /** The refusal's header record for the current second (built once per second). */
    refused() {
      if (refusedFor !== t) {
        refused = { 'RateLimit-Policy': f.policy, RateLimit: `${head}0;t=${t}`, 'Retry-After': String(t), 'Cache-Control': 'no-store' }
        refusedFor = t
      }
      return refused
    },
  }
}
