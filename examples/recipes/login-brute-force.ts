import { MemoryStore, rateLimit, type Store } from '@tollgate/express'
import express from 'express'

/** Stands in for your user store: one account, "ada", whose password is "correct horse". */
function passwordMatches(username: unknown, password: unknown): boolean {
  return username === 'ada' && password === 'correct horse'
}

/** `store`: where counts live (a `RedisStore` when several processes serve the app); `prefix`: of every key it writes. */
export function createApp({ store = new MemoryStore() as Store, prefix = 'tg:' } = {}) {
  const app = express()
  app.use(express.json())

  // One account from one client IP: 5 failed logins in a minute, then locked out for 15 minutes.
  // Keyed by IP and account, so a guesser cannot lock the real user out from elsewhere.
  const perAccount = rateLimit({
    max: 5,
    window: '1m',
    blockDuration: '15m',
    skipSuccessfulRequests: true, // a successful login never counts
    key: (req) => `${req.ip}:${String(req.body?.username ?? '').toLowerCase()}`,
    prefix: `${prefix}login:account:`,
    name: 'login-account',
    store,
  })
  // One client IP across accounts: 20 failed logins an hour, for a guesser who moves from account to account.
  const perIp = rateLimit({
    max: 20,
    window: '1h',
    skipSuccessfulRequests: true,
    prefix: `${prefix}login:ip:`,
    name: 'login-ip',
    store,
  })

  app.post('/login', perIp, perAccount, (req, res) => {
    if (passwordMatches(req.body?.username, req.body?.password)) res.json({ ok: true })
    else res.status(401).json({ error: 'invalid username or password' })
  })

  // Support unlocks an account for a client: the block and the counts go, in every process sharing the store.
  const unlock = (ip: string, username: string) => perAccount.limiter.reset(`${ip}:${username.toLowerCase()}`)
  return { app, unlock }
}
