// Shared plumbing for the benchmark servers: argument parsing, the Redis client, READY, and
// shutting down when the runner goes away. Nothing here runs on the request path.
import { realpathSync } from 'node:fs'
import { connect } from 'node:net'
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

/**
 * Keys outlive their window by this much, as Tollgate's do (TTL_MARGIN_MS): the same PEXPIRE, the same
 * key lifetime in Redis. (Expiring right at the window's end, the keys would also be gone when the
 * runner counts them after a slice if a window turned in between.)
 */
const MINIMAL_REDIS_TTL_MARGIN_MS = 1000
/** A batch is sent at once when it holds this many keys (Tollgate's MAX_BATCH_KEYS). */
const MINIMAL_REDIS_BATCH_KEYS = 64

/**
 * The minimal limiter counting in Redis: the least a Redis-backed fixed-window limiter does per request
 * with the required pattern, written by hand for this bench as the floor for the Redis cells. The
 * requests of one event-loop turn are collected (the first schedules a setImmediate flush; a batch of
 * 64 keys goes at once), those with the same key merged into one INCRBY, and the batch written as ONE
 * string on a socket of its own: MULTI, INCRBY key n and PEXPIRE key ttl per key, EXEC. The replies
 * (+OK, a +QUEUED per command, EXEC's array of integers) are read from the bytes by hand, and each
 * request given its own position in its key's count. No client library, options, retries or timeouts;
 * an error reply or a closed socket answers the requests waiting on it with null (the server sends 500).
 * Resolves once the socket is connected.
 */
export async function minimalRedisLimiter(max, windowMs, url, prefix) {
  if (!url) fail('this case needs --redis <url>')
  const at = /^redis:\/\/(?:[^@/]*@)?(\[[^\]]*\]|[^:/]*)(?::(\d+))?/.exec(url)
  if (!at) fail(`minimal-redis: cannot parse --redis ${url} (want redis://host:port)`)
  const host = at[1].replace(/^\[|\]$/g, '') || '127.0.0.1'
  const port = Number(at[2] ?? 6379)
  const socket = connect(port, host)
  socket.setNoDelay(true)
  await new Promise((resolve) => {
    const refused = (err) => fail(`minimal-redis: cannot connect to ${host}:${port}: ${err.message}`)
    socket.once('error', refused)
    socket.once('connect', () => {
      socket.off('error', refused)
      resolve()
    })
  })

  const f = floorResponses(max, windowMs)
  const head = `"${f.name}";r=`
  let t = 1
  let refusedFor = 0
  let refused = f.refused

  // This turn's keys: { key, n, t, ttl, cb, more } by key (cb: the first request's callback, more: the others').
  let byKey = new Map()
  let batch = []
  let scheduled = false
  const inFlight = [] // transactions written, oldest first: { batch, replies, left, error }
  let dead = false

  const settle = (entry, count) => {
    t = entry.t // for refused()
    let position = count - entry.n + 1
    entry.cb(position <= max ? `${head}${max - position};t=${entry.t}` : undefined)
    if (entry.more === undefined) return
    for (const cb of entry.more) {
      position++
      cb(position <= max ? `${head}${max - position};t=${entry.t}` : undefined)
    }
  }
  const failEntry = (entry) => {
    entry.cb(null)
    if (entry.more !== undefined) for (const cb of entry.more) cb(null)
  }
  const failAll = (why) => {
    if (!dead) process.stderr.write(`minimal-redis: ${why}\n`)
    dead = true
    socket.destroy()
    for (const tx of inFlight.splice(0)) for (const entry of tx.batch) failEntry(entry)
  }

  const flush = () => {
    const entries = batch
    batch = []
    byKey = new Map()
    if (dead) {
      for (const entry of entries) failEntry(entry)
      return
    }
    let out = '*1\r\n$5\r\nMULTI\r\n'
    for (const { key, n, ttl } of entries) {
      const k = `$${Buffer.byteLength(key)}\r\n${key}\r\n`
      const count = String(n)
      const ms = String(ttl)
      out += `*3\r\n$6\r\nINCRBY\r\n${k}$${count.length}\r\n${count}\r\n*3\r\n$7\r\nPEXPIRE\r\n${k}$${ms.length}\r\n${ms}\r\n`
    }
    out += '*1\r\n$4\r\nEXEC\r\n'
    inFlight.push({ batch: entries, replies: 0, left: -1, error: false })
    socket.write(out)
  }
  const onImmediate = () => {
    scheduled = false
    if (batch.length) flush()
  }

  // RESP2, the replies this transaction gets: one line each (+OK, +QUEUED, *N, :n, -error), CRLF ended.
  let rest // the bytes of an unfinished line, from the last chunk
  socket.on('data', (chunk) => {
    const buf = rest === undefined ? chunk : Buffer.concat([rest, chunk])
    rest = undefined
    let pos = 0
    for (;;) {
      const lf = buf.indexOf(10, pos)
      if (lf < 0) break
      const type = buf[pos]
      let value = 0
      if (type === 58 || type === 42) {
        // :n or *N: the integer after the type byte, up to the CR.
        let i = pos + 1
        const negative = buf[i] === 45
        if (negative) i++
        for (; i < lf - 1; i++) value = value * 10 + buf[i] - 48
        if (negative) value = -value
      }
      pos = lf + 1
      const tx = inFlight[0]
      if (tx === undefined) return failAll('a reply with no transaction waiting for it')
      const keys = tx.batch.length
      if (tx.left > 0) {
        // An element of EXEC's array: INCRBY's count (even) or PEXPIRE's 1/0 (odd).
        const j = 2 * keys - tx.left--
        if (j % 2 === 0) {
          if (type === 58) settle(tx.batch[j >> 1], value)
          else failEntry(tx.batch[j >> 1])
        }
        if (tx.left === 0) inFlight.shift()
      } else if (tx.replies < 2 * keys + 1) {
        // MULTI's +OK, then a +QUEUED per command; an error here makes EXEC abort.
        tx.replies++
        if (type !== 43) tx.error = true
      } else {
        // EXEC: *2k, then its elements; an error (EXECABORT) or a null array fails the batch.
        if (type === 42 && value === 2 * keys && !tx.error) tx.left = value
        else {
          if (type !== 45 && !(type === 42 && value < 0)) return failAll('an EXEC reply out of step with its transaction')
          inFlight.shift()
          for (const entry of tx.batch) failEntry(entry)
        }
      }
    }
    if (pos < buf.length) rest = buf.subarray(pos)
  })
  socket.on('error', () => {}) // 'close' follows
  socket.on('close', () => failAll('the Redis connection closed'))

  return {
    policy: f.policy,
    body: f.body,
    contentType: f.contentType,
    /**
     * Counts one request of `ip` in Redis; `cb` gets the `RateLimit` value for an allowed one,
     * undefined when refused, null when Redis failed (answer 500).
     */
    take(ip, cb) {
      const now = Date.now()
      const index = Math.floor(now / windowMs)
      const key = `${prefix}${ip}:${index}`
      const entry = byKey.get(key)
      if (entry !== undefined) {
        entry.n++
        if (entry.more === undefined) entry.more = [cb]
        else entry.more.push(cb)
        return
      }
      const left = (index + 1) * windowMs - now // >= 1
      const fresh = { key, n: 1, t: Math.ceil(left / 1000), ttl: left + MINIMAL_REDIS_TTL_MARGIN_MS, cb, more: undefined }
      byKey.set(key, fresh)
      batch.push(fresh)
      if (batch.length >= MINIMAL_REDIS_BATCH_KEYS) flush()
      else if (!scheduled) {
        scheduled = true
        setImmediate(onImmediate)
      }
    },
    /** The refusal's header record for the current second (built once per second), as minimalLimiter's. */
    refused() {
      if (refusedFor !== t) {
        refused = { 'RateLimit-Policy': f.policy, RateLimit: `${head}0;t=${t}`, 'Retry-After': String(t), 'Cache-Control': 'no-store' }
        refusedFor = t
      }
      return refused
    },
  }
}
