import { parseAdaptiveOptions } from '../../packages/core/src/adaptive/options'

test('defaults: gradient2, a limit of 20 between 4 and 1000, tolerance 1.2, the queue timeout from the latency', () => {
  const { gate, priority } = parseAdaptiveOptions()
  expect({ ...gate, clock: undefined }).toEqual({
    algorithm: 'gradient2',
    initialLimit: 20,
    minLimit: 4,
    maxLimit: 1000,
    tolerance: 1.2,
    queueTimeoutMs: undefined,
    maxQueue: undefined,
    eventLoopUtilization: 0.95,
    intervalMs: 100,
    baselineWindowMs: 30_000,
    clock: undefined,
  })
  expect(priority).toBeUndefined()
  expect(parseAdaptiveOptions().name).toBe('default')
})

test.each([
  [{ algorithm: 'cubic' }, /Invalid option "algorithm".*"cubic"/],
  [{ minLimit: 0 }, /Invalid option "minLimit".*0/],
  [{ minLimit: 10, maxLimit: 5 }, /Invalid option "maxLimit".*5/],
  [{ initialLimit: 2000 }, /Invalid option "initialLimit".*2000/],
  [{ tolerance: 0.5 }, /Invalid option "tolerance".*0\.5/],
  [{ eventLoopUtilization: 2 }, /Invalid option "eventLoopUtilization".*2/],
  [{ queueTimeout: 'soon' }, /Invalid option "queueTimeout".*soon/],
  [{ priority: 'high' }, /Invalid option "priority".*high/],
  [{ maxQueue: -1 }, /Invalid option "maxQueue".*-1/],
  [{ meterProvider: {} }, /Invalid option "meterProvider"/],
  [{ name: '' }, /Invalid option "name"/],
  [{ queueTimout: '10ms' }, /Unknown adaptiveConcurrency option "queueTimout"/],
])('%j is refused at construction, naming the option and the value', (options, message) => {
  expect(() => parseAdaptiveOptions(options as never)).toThrow(message)
})
