#!/usr/bin/env node
// A TCP delay proxy for the lease benchmark (bench/lease.mjs): listens on 127.0.0.1 and forwards every
// connection to 127.0.0.1:--target-port (a redis-server), holding each chunk at least --delay-ms before
// writing it on, in each direction, in order. A round trip through it therefore takes at least twice
// --delay-ms more than a direct one. Node's timers fire on whole milliseconds of the event loop's clock,
// so a chunk can be held up to about a millisecond longer than asked: the proxy measures what it held
// each chunk and reports it.
//
//   node bench/lib/delay-proxy.mjs --target-port P [--delay-ms 1]
//
// Prints `READY port=<port> pid=<pid>` when listening. Each `stats` line on stdin is answered with
// `STATS {json}`: chunks and bytes read from the app's side (`up`, each one write of the app's that
// reached Redis) and from Redis's side (`down`), and the time chunks were held. Exits when stdin ends
// (the runner went away) or on SIGTERM/SIGINT.
import net from 'node:net'
import { parseArgs } from 'node:util'
import { readRunner } from './runner-stdin.mjs'

const { values } = parseArgs({ options: { 'target-port': { type: 'string' }, 'delay-ms': { type: 'string', default: '1' } } })
const target = Number(values['target-port'])
const delayMs = Number(values['delay-ms'])
if (!Number.isInteger(target) || target <= 0 || !(delayMs >= 0)) {
  process.stderr.write('usage: node bench/lib/delay-proxy.mjs --target-port P [--delay-ms 1]\n')
  process.exit(2)
}

const stats = { connections: 0, up: 0, upBytes: 0, down: 0, downBytes: 0, held: 0, heldMs: 0, maxHeldMs: 0 }

/** Forwards `src`'s chunks to `dst`, each no sooner than `delayMs` after it arrived, in order. */
function forward(src, dst, dir) {
  const queue = [] // { chunk, at } in arrival order; queue[head] is the oldest not yet written
  let head = 0
  let timer
  const flush = () => {
    timer = undefined
    const now = performance.now()
    const parts = []
    while (head < queue.length && queue[head].at + delayMs <= now) {
      const { chunk, at } = queue[head++]
      parts.push(chunk)
      const held = now - at
      stats.held++
      stats.heldMs += held
      if (held > stats.maxHeldMs) stats.maxHeldMs = held
    }
    if (head === queue.length) {
      queue.length = 0
      head = 0
    }
    if (parts.length > 0 && !dst.destroyed) dst.write(parts.length === 1 ? parts[0] : Buffer.concat(parts))
    if (head < queue.length) timer = setTimeout(flush, Math.max(1, Math.ceil(queue[head].at + delayMs - now)))
  }
  src.on('data', (chunk) => {
    stats[dir]++
    stats[`${dir}Bytes`] += chunk.length
    queue.push({ chunk, at: performance.now() })
    if (timer === undefined) timer = setTimeout(flush, delayMs)
  })
}

const server = net.createServer((app) => {
  stats.connections++
  app.setNoDelay(true)
  const redis = net.connect(target, '127.0.0.1')
  redis.setNoDelay(true)
  forward(app, redis, 'up')
  forward(redis, app, 'down')
  const close = () => {
    app.destroy()
    redis.destroy()
  }
  for (const s of [app, redis]) {
    s.on('error', close)
    s.on('close', close)
  }
})
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`READY port=${server.address().port} pid=${process.pid}\n`)
})

const stop = () => process.exit(0)
readRunner((line) => {
  if (line === 'stats') process.stdout.write(`STATS ${JSON.stringify(stats)}\n`)
}, stop)
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
