import { MemoryStore, rateLimit } from '@tollgate/express'
import express from 'express'

const app = express()
app.use(rateLimit({ max: 2, window: '1m', store: new MemoryStore() }))
app.get('/', (req, res) => res.json({ remaining: req.rateLimit?.remaining }))
const server = app.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`))
