// Compiled to CommonJS (require) with the classic node resolution that `module: commonjs` implies, the
// setting that cannot read "exports": the types of @tollgate/core/adapter must still resolve.
import type { AddressInfo } from 'node:net'
import { type Decision, rateLimit } from '@tollgate/express'
import express from 'express'

const app = express()
app.use(rateLimit({ max: 2, window: '1m' }))
app.get('/', (req, res) => {
  const decision: Decision | undefined = req.rateLimit
  res.json({ remaining: decision?.remaining })
})
const server = app.listen(0, '127.0.0.1', () => {
  console.log(`listening ${(server.address() as AddressInfo).port}`)
})
