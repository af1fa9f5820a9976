import { rateLimit, type Store } from '@tollgate/express'
import express from 'express'

/** A chat completion request, OpenAI-style. */
export interface ChatRequest {
  messages: Array<{ role: string; content: string }>
  max_tokens?: number
}

/** What the provider's client returns: the reply and the tokens it used. */
export interface Completion {
  choices: Array<{ message: { role: string; content: string } }>
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number }
}

/** Your LLM provider's client (the OpenAI SDK's `chat.completions.create`, a fetch to your model server...). */
export type CallModel = (body: ChatRequest) => Promise<Completion>

/** An upper bound of a request's tokens: its prompt at about four characters a token, plus the longest reply it allows. */
export function estimateTokens(body: ChatRequest): number {
  const prompt = body.messages.reduce((n, m) => n + m.content.length, 0)
  return Math.ceil(prompt / 4) + (body.max_tokens ?? 1024)
}

export function tokenBudgetApp(store: Store, callModel: CallModel): express.Express {
  const app = express()
  app.use(express.json())
  app.post(
    '/v1/chat/completions',
    rateLimit({
      limits: [
        { max: 40_000, window: '1m', name: 'tokens-per-minute' },
        { max: 1_000_000, window: '1d', name: 'tokens-per-day' },
      ],
      key: (req) => req.get('x-api-key') ?? 'anonymous',
      cost: (req) => estimateTokens(req.body as ChatRequest),
      // Once the response has ended: the tokens really used, or 0 when the call failed.
      actualCost: (_req, res: express.Response) => res.locals.usage?.total_tokens ?? 0,
      store,
      prefix: 'tg:tokens:',
    }),
    async (req, res, next) => {
      try {
        const completion = await callModel(req.body as ChatRequest)
        res.locals.usage = completion.usage
        res.json(completion)
      } catch (error) {
        next(error)
      }
    },
  )
  return app
}

// In your server, with the budgets shared by every process:
//   tokenBudgetApp(new RedisStore({ client: new Redis(process.env.REDIS_URL) }), callModel).listen(3000)
