// docs/recipes/llm-token-budget.md, run: ./llm-token-budget.ts is the document's code, verbatim (the first test
// checks it), then driven over HTTP with a stand-in model on the memory store and on Redis.

import { MemoryStore, RedisStore } from '@tollgate/express'
import request from 'supertest'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { type CallModel, tokenBudgetApp } from './llm-token-budget'
import { recipeCode, recipeFile } from './recipe'

const db = useRedis()

it('runs the code of docs/recipes/llm-token-budget.md as written there', () => {
  expect(recipeFile('llm-token-budget')).toBe(recipeCode('llm-token-budget'))
})

/** The `r` of one policy in a RateLimit field. */
function remaining(header: string | undefined, policy: string): number {
  const match = new RegExp(`"${policy}";r=(\\d+)`).exec(header ?? '')
  if (match === null) throw new Error(`no ${policy} in ${header}`)
  return Number(match[1])
}

/** A model that answers with a fixed number of tokens, and fails when asked to. */
const model =
  (tokens: Map<string, number>): CallModel =>
  async (body) => {
    const content = body.messages[0]!.content
    if (content === 'fail') throw new Error('upstream unavailable')
    const total = tokens.get(content) ?? 100
    return {
      choices: [{ message: { role: 'assistant', content: 'ok' } }],
      usage: { prompt_tokens: 10, completion_tokens: total - 10, total_tokens: total },
    }
  }

/** Away from the last seconds of a minute, so one test's requests share a minute window. */
async function awayFromMinuteEdge(): Promise<void> {
  const into = Date.now() % 60_000
  if (into > 55_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - into + 50))
}

describe.each([
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis', () => new RedisStore({ client: db.client, timeout: '2s' })],
] as const)('on the %s store', (_name, makeStore) => {
  it('reserves the estimate in both budgets, then settles each request to the tokens it used', async () => {
    await awayFromMinuteEdge()
    const app = tokenBudgetApp(
      makeStore(),
      model(
        new Map([
          ['short', 300],
          ['long', 9000],
        ]),
      ),
    )
    const key = testPrefix('llm-key')
    const ask = (content: string, max_tokens: number) =>
      request(app)
        .post('/v1/chat/completions')
        .set('x-api-key', key)
        .send({ messages: [{ role: 'user', content }], max_tokens })
    // Estimate: 2 prompt tokens + 2000 allowed for the reply = 2002.
    const first = await ask('short', 2000)
    expect(first.status).toBe(200)
    expect(remaining(first.headers.ratelimit, 'tokens-per-minute')).toBe(40_000 - 2002)
    // The first used 300: settled, it leaves 40,000 − 300, minus this one's own estimate (1 + 2000).
    const second = await ask('long', 2000)
    expect(remaining(second.headers.ratelimit, 'tokens-per-minute')).toBe(40_000 - 300 - 2001)
    expect(remaining(second.headers.ratelimit, 'tokens-per-day')).toBe(1_000_000 - 300 - 2001)
    // The second used 9000, more than its estimate: charged in full.
    const third = await ask('fail', 100)
    expect(third.status).toBe(500)
    expect(remaining(third.headers.ratelimit, 'tokens-per-minute')).toBe(40_000 - 300 - 9000 - 101)
    // The failed call used nothing: all of its estimate came back.
    const fourth = await ask('short', 30_000)
    expect(remaining(fourth.headers.ratelimit, 'tokens-per-minute')).toBe(40_000 - 300 - 9000 - 30_002)
    // The fourth used 300: 30,400 left this minute (700, had it kept its estimate), so a request
    // estimated at 30,502 is refused, and one estimated at 30,002 is not.
    const refused = await ask('short', 30_500)
    expect(refused.status).toBe(429)
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0)
    expect((await ask('short', 30_000)).status).toBe(200)
  })
})
