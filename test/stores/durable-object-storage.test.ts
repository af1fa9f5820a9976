import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type DurableObjectNamespaceLike, DurableObjectStore } from '@tollgate/cloudflare'
import { type AlgorithmName, Limiter } from '@tollgate/core'
import { startWorkerd } from '../harness/miniflare'
import { sleep } from '../support/time'

/*
 * What a TollgateCounter keeps in its storage: counts that outlive the object (workerd restarted on the
 * same storage, as a deploy or an eviction restarts an object), and nothing left once its windows are over.
 */

const dir = mkdtempSync(join(tmpdir(), 'tollgate-durable-objects-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

let prefixes = 0
const prefix = () => `tg:storage:${process.pid}:${++prefixes}:`

/** The storage keys of the object that owns `owner`. */
async function storedKeys(namespace: DurableObjectNamespaceLike, owner: string): Promise<string[]> {
  const stub = namespace.get(namespace.idFromName(owner))
  const response = await stub.fetch('https://inspect.test/keys', { method: 'POST', body: '', headers: {} })
  return JSON.parse(await response.text()) as string[]
}

describe('TollgateCounter storage', () => {
  it.each<AlgorithmName>(['fixed-window', 'sliding-window', 'gcra', 'sliding-log'])(
    'keeps the count of a window across a restart of its object (%s)',
    async (algorithm) => {
      const p = prefix()
      // A fixed clock in the middle of a window: the restart falls inside it.
      const now = (Math.floor(Date.now() / 60_000) + 1) * 60_000 + 1000
      const run = async (requests: number) => {
        const workerd = await startWorkerd({ persist: dir })
        try {
          const store = new DurableObjectStore({ namespace: await workerd.namespace('INSPECTED'), timeout: '5s' })
          const limiter = new Limiter({ max: 5, window: '1m', algorithm, prefix: p, clock: () => now, store })
          const allowed: boolean[] = []
          for (let i = 0; i < requests; i++) allowed.push((await limiter.consume('203.0.113.9')).allowed)
          return allowed
        } finally {
          await workerd.dispose()
        }
      }
      expect(await run(3)).toEqual([true, true, true])
      expect(await run(4)).toEqual([true, true, false, false])
    },
  )

  it.each<AlgorithmName>(['fixed-window', 'gcra'])('deletes what it stored once the windows are over (%s)', async (algorithm) => {
    const workerd = await startWorkerd()
    try {
      const namespace = await workerd.namespace('INSPECTED')
      const p = prefix()
      const limiter = new Limiter({
        max: 5,
        window: '1s',
        algorithm,
        prefix: p,
        store: new DurableObjectStore({ namespace, timeout: '5s' }),
      })
      await limiter.consume('c')
      await limiter.consume('c')
      expect(await storedKeys(namespace, `${p}{c}`)).not.toEqual([])
      // Read again two windows and a second after the last change, by the object's alarm.
      let keys: string[] = []
      for (let waited = 0; waited < 8000; waited += 250) {
        await sleep(250)
        keys = await storedKeys(namespace, `${p}{c}`)
        if (keys.length === 0) break
      }
      expect(keys).toEqual([])
    } finally {
      await workerd.dispose()
    }
  })
})
