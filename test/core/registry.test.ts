import { KIT } from '../../packages/core/src/registry'

// The features' table (registry.ts) is one per process: an app that loads Tollgate both as ESM and as
// CommonJS has two copies of the module, and a store of one copy must decide the algorithms a limiter of
// the other registered.

it('keeps one table per process, whichever copy of the module reads it', () => {
  let other: unknown
  jest.isolateModules(() => {
    other = (require('../../packages/core/src/registry') as typeof import('../../packages/core/src/registry')).KIT
  })
  expect(other).toBe(KIT)
  expect(KIT.algorithms['fixed-window']).toBeDefined()
})
