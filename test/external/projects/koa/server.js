import { rateLimit } from '@tollgate/koa'
import Koa from 'koa'

const app = new Koa()
app.use(rateLimit({ max: 2, window: '1m' }))
app.use((ctx) => {
  ctx.body = { remaining: ctx.state.rateLimit?.remaining }
})
const server = app.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`))
