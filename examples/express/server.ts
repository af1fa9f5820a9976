// The demo behind `npm start`: an Express app limited to 10 requests per second per client IP,
// on the in-memory store (set REDIS_URL to count in Redis instead). Once listening it sends itself one
// burst of 12 requests and prints what came back, then keeps serving for curl.

import { Agent, request as httpRequest, type IncomingMessage } from 'node:http'
import { debuglog } from 'node:util'
import { RedisStore, rateLimit, type Store } from '@tollgate/express'
import express from 'express'

const MAX = 10
const BURST = 12
// The 429's headers worth showing (Express's own Date, ETag, Keep-Alive... are left out).
const SHOWN = /^(ratelimit|ratelimit-policy|retry-after|cache-control|content-type)$/i

async function redisStore(url: string): Promise<Store> {
  const { Redis } = await import('ioredis')
  return new RedisStore({
    client: new Redis(url, { maxRetriesPerRequest: 1 }),
  })
}

interface Reply {
  status: number
  statusLine: string
  headers: string[]
  body: string
}

function get(url: string, agent: Agent): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent }, (res: IncomingMessage) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        body += chunk
      })
      res.on('end', () => {
        const headers: string[] = []
        // rawHeaders keeps the names as the server wrote them (RateLimit-Policy, not ratelimit-policy).
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
          if (SHOWN.test(res.rawHeaders[i]!)) headers.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`)
        }
        resolve({
          status: res.statusCode ?? 0,
          statusLine: `HTTP/${res.httpVersion} ${res.statusCode} ${res.statusMessage}`,
          headers,
          body,
        })
      })
    })
    req.on('error', reject)
    req.end()
  })
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Sends BURST requests one after another, starting just after a second begins. The limit's windows are
 * aligned to the clock's seconds, so a burst sent at a random moment crosses into the next window about
 * as often as it takes longer than the time left in the current one, and then shows more than MAX 200s
 * (issue 16). Started at the top of a second, it has the whole second. If it ever took longer than that
 * (a machine far too busy), it is sent again rather than showing a misleading result.
 */
async function burst(url: string): Promise<Reply[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  try {
    await get(url, agent) // connects, and warms up the server, in a window of its own before the burst's
    for (let attempt = 1; ; attempt++) {
      await sleep(1000 - (Date.now() % 1000) + 5)
      const second = Math.floor(Date.now() / 1000)
      const replies: Reply[] = []
      for (let i = 0; i < BURST; i++) replies.push(await get(url, agent))
      if (Math.floor(Date.now() / 1000) === second || attempt === 3) return replies
    }
  } finally {
    agent.destroy()
  }
}

async function main() {
  const store = process.env.REDIS_URL ? await redisStore(process.env.REDIS_URL) : undefined
  const app = express()

  app.use(rateLimit({ max: MAX, store }))

  app.get('/', (req, res) => {
    res.json({ hello: 'world', remaining: req.rateLimit?.remaining })
  })

  // A tighter limit of its own on one route, stacked on the global one.
  app.post('/login', rateLimit({ max: 5, window: '1 minute', prefix: 'tg:login:', store }), (_req, res) => {
    res.json({ ok: true })
  })

  const port = Number(process.env.PORT ?? 3000)
  const server = app.listen(port, '127.0.0.1', async () => {
    const url = `http://127.0.0.1:${port}/`
    console.log(`Tollgate demo listening on ${url} (store: ${store ? `Redis at ${process.env.REDIS_URL}` : 'memory'})`)
    console.log(`Limit: ${MAX} requests per second per client IP. ${BURST} requests sent at the start of a second:`)
    try {
      const replies = await burst(url)
      console.log(`  ${replies.map((r) => r.status).join(' ')}`)
      const refused = replies.find((r) => r.status === 429)
      if (refused) {
        console.log('The first 429:')
        for (const line of [refused.statusLine, ...refused.headers, '', refused.body]) console.log(line ? `  ${line}` : '')
      }
    } catch (error) {
      console.error(`The burst failed: ${error instanceof Error ? error.message : String(error)}`)
    }
    console.log('Still serving. Try it yourself:')
    console.log(`  for i in $(seq 1 12); do curl -s -o /dev/null -w "%{http_code} " ${url}; done; echo`)
    console.log(`  curl -si ${url} | grep -i -E "^(HTTP|ratelimit|retry-after)"`)
    if (!debuglog('tollgate').enabled) console.log('Start with NODE_DEBUG=tollgate to see a line per decision.')
  })
  server.on('error', (error) => {
    console.error(`Could not listen on port ${port}: ${error.message} (set PORT to another port)`)
    process.exit(1)
  })
}

void main()
