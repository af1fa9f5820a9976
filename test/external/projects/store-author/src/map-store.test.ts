import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Limiter } from '@tollgate/core'
import { storeContract } from '@tollgate/core/testing'
import { MapStore } from './map-store.js'

let stores = 0
storeContract('MapStore', () => ({ store: new MapStore(), prefix: `t${++stores}:` }), {
  algorithms: ['fixed-window'],
  runner: { describe, it },
})

describe('MapStore behind a Limiter', () => {
  it('refuses the third call with max 2', async () => {
    const limiter = new Limiter({ max: 2, window: '1m', store: new MapStore() })
    const allowed: boolean[] = []
    for (let i = 0; i < 3; i++) allowed.push((await limiter.consume('client')).allowed)
    assert.deepEqual(allowed, [true, true, false])
  })
})
