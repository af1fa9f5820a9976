import type { RedisTransactionLike } from '../../algorithms/fixed-window'
import { scriptsOf } from '../../algorithms/scripts'
import type { AlgorithmName } from '../../types'
import type { Correction } from './correction-batcher'
import type { RedisClientLike } from './store-client'
import { describeReply } from './transaction'

/*
 * A turn's releases (and sliding-log refunds) as plain ZREMs in the client's own transaction. A removal by
 * call id needs no script: ZREM is atomic on its own and removes nothing when sent again, so the release
 * stays exactly once, and Redis runs it as a queued command rather than a script's call (arguments read
 * into Lua, the command looked up and answered through Lua), which cost it more than the removal itself.
 * The batch comes as the refund batch script takes it (correction-batch.ts, LOG_REFUND_BATCH_SCRIPT): per
 * call its keys, and [cost, id]. Each call is answered as that script answers it: its id, or ['err',
 * message] when one of its keys is of another type (WRONGTYPE, that call alone). A refusal (NOPERM) makes
 * EXEC abort the whole transaction, the batch's error; a reply that is not a count is not an answer.
 */

type Removals = RedisTransactionLike & Required<Pick<RedisTransactionLike, 'zrem'>>

/**
 * The transaction for a batch of `op` on `algorithm`, when it is a removal by call id and the client's
 * transaction has ZREM (any ioredis or node-redis client; not a stand-in without it). Not on a Cluster: a
 * transaction there must follow redirects itself, and the script, which the client routes, does.
 */
export function removalTransaction(
  client: RedisClientLike,
  op: Correction,
  algorithm: AlgorithmName,
  cluster: boolean,
): Removals | undefined {
  if (op !== 'refund' || cluster || scriptsOf(algorithm).refundBatch === undefined) return undefined
  const tx = client.multi()
  return typeof tx.zrem === 'function' ? (tx as Removals) : undefined
}

/** Sends the batch (`keys`, `args` as correctionBatchArgs lays them out) in `tx`; resolves with an answer per call. */
export function removeByCallId(tx: Removals, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown[] | null> {
  const calls = Number(args[0])
  const commandsOf: number[] = []
  const ids: string[] = []
  let k = 0
  let a = 1
  for (let c = 0; c < calls; c++) {
    const nk = Number(args[a])
    const cost = Number(args[a + 2])
    const id = String(args[a + 3])
    const members = [`${id}:1`]
    for (let j = 2; j <= cost; j++) members.push(`${id}:${j}`)
    for (let i = 0; i < nk; i++) tx.zrem(keys[k + i]!, ...members)
    commandsOf.push(nk)
    ids.push(id)
    k += nk
    a += 2 + Number(args[a + 1])
  }
  return tx.exec().then((pairs) => {
    if (pairs === null || !Array.isArray(pairs)) return null
    const answers: unknown[] = []
    let at = 0
    for (let c = 0; c < calls; c++) {
      let answer: unknown = ids[c]
      for (let i = 0; i < commandsOf[c]!; i++) {
        const pair = pairs[at + i]
        const [error, value] = Array.isArray(pair) ? pair : [null, pair]
        if (error instanceof Error) {
          if (!error.message.includes('WRONGTYPE')) throw error
          if (answer === ids[c]) answer = ['err', error.message]
        } else if (typeof value !== 'number' && answer === ids[c]) {
          // Not a count: an answer that is not the call's id, which the batcher reads as out of step.
          answer = `not a count: ${describeReply(value)}`
        }
      }
      answers.push(answer)
      at += commandsOf[c]!
    }
    return pairs.length === at ? answers : null
  })
}
