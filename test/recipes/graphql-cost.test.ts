// docs/recipes/graphql-cost.md, run: ./graphql-cost.ts is the document's code, verbatim (the first test
// checks it), then driven over HTTP with a stand-in GraphQL execution on the memory store and on Redis.

import { MemoryStore, RedisStore } from '@tollgate/express'
import request from 'supertest'
import { testPrefix } from '../harness/redis'
import { useRedis } from '../harness/use-redis'
import { actualCost, type Execute, estimateCost, graphqlApp } from './graphql-cost'
import { recipeCode, recipeFile } from './recipe'

const db = useRedis()

it('runs the code of docs/recipes/graphql-cost.md as written there', () => {
  expect(recipeFile('graphql-cost')).toBe(recipeCode('graphql-cost'))
})

/** What the recipe's `r` says is left this hour. */
const left = (header: string | undefined) => Number(/;r=(\d+)/.exec(header ?? '')?.[1])

/** Repositories with `found` of them existing, whatever page size the query asked for. */
const execute =
  (found: number): Execute =>
  async () => ({
    data: { viewer: { login: 'octocat', repositories: { nodes: Array.from({ length: found }, (_, i) => ({ name: `repo-${i}` })) } } },
  })

const QUERY = 'query($n: Int!) { viewer { login repositories(first: $n) { nodes { name } } } }'

it('estimates from the page sizes a query asks for, and counts the objects a result holds', () => {
  expect(estimateCost({ query: '{ viewer { login } }' })).toBe(1)
  expect(estimateCost({ query: QUERY, variables: { n: 100 } })).toBe(101)
  expect(estimateCost({ query: '{ a(first: 10) { b(last: 5) { c } } }' })).toBe(16)
  // viewer, repositories, and 3 nodes: 5 objects, plus the query's point.
  expect(actualCost({ data: { viewer: { login: 'x', repositories: { nodes: [{}, {}, {}] } } } })).toBe(6)
  expect(actualCost({ errors: [{ message: 'boom' }] })).toBe(1)
})

describe.each([
  ['memory', () => new MemoryStore({ sweepIntervalMs: 0 })],
  ['Redis', () => new RedisStore({ client: db.client, timeout: '2s' })],
] as const)('on the %s store', (_name, makeStore) => {
  it('admits a query on its estimate and charges what it really cost', async () => {
    const store = makeStore()
    const token = testPrefix('graphql-token')
    const post = (app: ReturnType<typeof graphqlApp>, n: number) =>
      request(app).post('/graphql').set('authorization', token).send({ query: QUERY, variables: { n } })
    // 3 repositories exist: a query asking for 100 is estimated at 101 and costs 1 + 5 = 6.
    const few = graphqlApp(store, execute(3))
    const first = await post(few, 100)
    expect(first.status).toBe(200)
    expect(left(first.headers.ratelimit)).toBe(5000 - 101)
    const second = await post(few, 100)
    expect(left(second.headers.ratelimit)).toBe(5000 - 6 - 101)
    // A query whose estimate is more than what is left is refused before it runs.
    const big = await post(few, 5000)
    expect(big.status).toBe(429)
    expect(big.body.errors[0].extensions.code).toBe('RATE_LIMITED')
    const third = await post(few, 10)
    expect(left(third.headers.ratelimit)).toBe(5000 - 6 - 6 - 11)
  })
})
