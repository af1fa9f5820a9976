import assert from 'node:assert/strict'
import { MemoryStore } from '../stores/memory-store'
import type { AlgorithmName, StoreCall, StoreResult } from '../types'
import { admit, type ContractRunner, type ContractStore, MINUTE, SECOND, windowStart } from './contract-support'
import { limitSpec, storeCall } from './store-calls'

/*
 * The store contract's agreement with the reference: beside the cases that each check one rule, a store
 * must give, call for call, the verdicts and numbers a MemoryStore gives for a sequence that mixes them.
 */

/** An answer as the contract compares it: the verdict and the numbers, nothing a store may add beside them. */
const answer = (result: StoreResult) => ({ allowed: result.allowed, values: [...result.values] })

/** The case for one algorithm, declared with the runner's `it`; off for the MemoryStore itself (`sameAsMemory: false`). */
export function memoryAgreementContract(it: ContractRunner['it'], algorithm: AlgorithmName, make: () => ContractStore): void {
  it('answers a fixed sequence of calls, across window edges, with the verdicts and numbers of the MemoryStore', async () => {
    const { store, prefix } = make()
    const reference = new MemoryStore({ sweepIntervalMs: 0 })
    const limits = [limitSpec(3, 10 * SECOND, 3, '10s'), limitSpec(7, MINUTE, algorithm === 'gcra' ? 4 : 7, '1m')]
    const t = windowStart(MINUTE)
    const last = new Map<string, [StoreCall, boolean]>()
    const answers: Array<[string, StoreResult, StoreResult]> = []
    for (const [at, client, step] of SEQUENCE) {
      const key = `${prefix}{${client}}`
      const what = `${at} ms, ${client}, ${step}`
      if (step === 'forget') {
        const forget = storeCall(algorithm, key, limits, 0, t + at)
        await Promise.all([store.forget(forget), reference.forget(forget)])
      } else if (step === 'refund') {
        const [previous, allowed] = last.get(client)!
        if (allowed) await Promise.all([store.refund(previous), reference.refund(previous)])
      } else {
        const c = storeCall(algorithm, key, limits, step, t + at)
        const [got, expected] = [await admit(store, c), reference.admit(c)]
        answers.push([what, got, expected])
        last.set(client, [c, expected.allowed])
      }
    }
    assert.deepEqual(
      answers.map(([what, got]) => [what, answer(got)]),
      answers.map(([what, , expected]) => [what, answer(expected)]),
    )
    const verdicts = answers.map(([, , e]) => e.allowed)
    assert.deepEqual([verdicts.includes(true), verdicts.includes(false)], [true, true], 'the sequence meets both verdicts')
  })
}

/**
 * [ms after a minute's start, client, cost | 'refund' (that client's previous call, if admitted) | 'forget'],
 * on 3 per 10 s and 7 per minute: bursts, costs from 0 to 3, and the edges of both windows.
 */
const SEQUENCE: Array<[number, string, number | 'refund' | 'forget']> = [
  [0, 'a', 1],
  [0, 'a', 2],
  [100, 'a', 1],
  [100, 'b', 3],
  [200, 'b', 1],
  [200, 'b', 'refund'],
  [2_500, 'a', 0],
  [9_999, 'a', 1],
  [10_000, 'a', 1],
  [10_000, 'a', 1],
  [10_000, 'b', 2],
  [10_000, 'b', 'refund'],
  [12_500, 'a', 2],
  [15_000, 'a', 1],
  [19_999, 'b', 3],
  [20_000, 'a', 3],
  [20_000, 'b', 1],
  [26_000, 'a', 1],
  [31_000, 'a', 'forget'],
  [31_000, 'a', 2],
  [45_000, 'b', 3],
  [55_000, 'a', 1],
  [59_999, 'a', 1],
  [60_000, 'a', 3],
  [60_000, 'b', 1],
  [61_000, 'b', 0],
]
