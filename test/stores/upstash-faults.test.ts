import { Limiter, type StoreErrorPolicy } from '@tollgate/core'
import { UpstashStore } from '@tollgate/upstash'
import { Redis as Upstash } from '@upstash/redis'
import { redisUrl, testPrefix } from '../harness/redis'
import { type RestFront, startRestFront } from '../harness/upstash-rest'
import { sleep } from '../support/time'

/*
 * A REST front that hangs, fails or is gone: each decision still comes within the store's deadline, by the
 * limiter's onStoreError policy, as with any other store; and the store is used again once the front answers.
 */

const TIMEOUT_MS = 200
/** What a decision may take past the deadline on a busy test machine. */
const SLACK_MS = 400

let front: RestFront
beforeEach(async () => {
  front = await startRestFront(redisUrl())
})
afterEach(() => front.close())

/** The client's retries of a request that could not be sent: three, 150 ms apart, so they run on past the deadline. */
const RETRY = { retries: 3, backoff: () => 150 }
const quiet = { warn() {}, error() {} }

function limiter(onStoreError: StoreErrorPolicy = 'fallback'): Limiter {
  const client = new Upstash({ url: front.url, token: front.token, enableTelemetry: false, retry: RETRY })
  const store = new UpstashStore({ client, timeout: TIMEOUT_MS })
  return new Limiter({ max: 3, window: '1m', algorithm: 'gcra', prefix: testPrefix('faults'), onStoreError, store, logger: quiet })
}

async function timed<T>(run: () => Promise<T> | T): Promise<[T, number]> {
  const started = Date.now()
  const value = await run()
  return [value, Date.now() - started]
}

describe('UpstashStore when the REST front fails', () => {
  it('falls back within the deadline while the front takes requests and never answers', async () => {
    const l = limiter()
    await l.consume('a')
    front.mode = 'stall'
    const [decision, ms] = await timed(() => l.consume('a'))
    expect([decision.source, decision.allowed, decision.remaining]).toEqual(['fallback', true, 1])
    expect(ms).toBeLessThan(TIMEOUT_MS + SLACK_MS)
  })

  it('refuses within the deadline with onStoreError "deny" while the front answers 503', async () => {
    const l = limiter('deny')
    front.mode = 'fail'
    const [decision, ms] = await timed(() => l.consume('a'))
    expect([decision.source, decision.allowed]).toEqual(['deny', false])
    expect(ms).toBeLessThan(TIMEOUT_MS + SLACK_MS)
  })

  it('falls back within the deadline once the front is gone, although the client keeps retrying', async () => {
    const l = limiter('allow')
    await front.close()
    const [decision, ms] = await timed(() => l.consume('a'))
    expect([decision.source, decision.allowed]).toEqual(['allow', true])
    expect(ms).toBeLessThan(TIMEOUT_MS + SLACK_MS)
    // The client's own retries end before the next test starts its front.
    await sleep(RETRY.retries * 150 + 100)
    front = await startRestFront(redisUrl())
  })

  it('goes back to the store when the front answers again', async () => {
    const l = limiter()
    front.mode = 'fail'
    expect((await l.consume('b')).source).toBe('fallback')
    front.mode = 'answer'
    let source = ''
    for (let i = 0; i < 30 && source !== 'store'; i++) {
      await sleep(100)
      source = (await l.consume('b')).source
    }
    expect(source).toBe('store')
  })
})
