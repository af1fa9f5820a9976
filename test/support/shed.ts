// For the tests of adaptive concurrency over HTTP: waiting for an event of the gate's, and what a shed request gets.

/** Waits, at most 5 s, until `check` holds, and fails the test if it never does. */
export async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10))
  expect(check()).toBe(true)
}

/** A shed request's answer: 503, Retry-After 1 s, and a problem-details body. */
export async function expectShed(response: Response): Promise<void> {
  expect(response.status).toBe(503)
  expect(response.headers.get('retry-after')).toBe('1')
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/)
  expect(await response.json()).toMatchObject({ status: 503, title: 'Service Unavailable' })
}
