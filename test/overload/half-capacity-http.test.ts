import { frameworks, offer, service } from './rig'

// At half its capacity a service is not overloaded, and the gate must not act as if it were: over real HTTP,
// with the classes' mix, every request is served. The run takes in the gate's first intervals and lasts past
// the moment a probe of its baseline would come if one were due (the benchmark runs five minutes:
// npm run bench -- overload --steady).

const CAPACITY = 8
const SERVICE_MS = 40
const SECONDS = 11

test('at half its capacity, nothing is refused', async () => {
  const handler = service(CAPACITY, SERVICE_MS)
  const { url, gate, close } = await frameworks.fastify({}, () => handler.serve())
  let results: Awaited<ReturnType<typeof offer>>
  try {
    results = await offer(url, [{ rate: (CAPACITY * 1000) / SERVICE_MS / 2, ms: SECONDS * 1000 }])
  } finally {
    await close()
  }
  expect(results.length).toBe((SECONDS * CAPACITY * 1000) / SERVICE_MS / 2)
  expect(results.filter((r) => r.status !== 200)).toEqual([])
  expect(gate.shed).toEqual({ critical: 0, normal: 0, sheddable: 0 })
}, 30_000)
