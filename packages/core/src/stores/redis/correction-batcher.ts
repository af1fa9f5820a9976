import { MAX_BATCH_CALLS } from '../../algorithms'
import { correctionBatchArgs } from '../../algorithms/correction-batch'
import { TollgateError } from '../../errors'
import type { AlgorithmName, StoreCall } from '../../types'

/*
 * The refunds and settles of one event-loop turn, sent together (algorithms/correction-batch.ts): one
 * script call per algorithm and operation, and on a Cluster per client key (its keys share one slot, as
 * the admits' batches do, script-batcher.ts). Each call is answered on its own: its call id, or its own
 * failure; a reply that is not one answer per call fails them all as a protocol error.
 */

export type Correction = 'refund' | 'settle'

/** Sends one batch: the algorithm's `op` batch script on `keys` and `args`, under the store's deadline. */
export type SendCorrections = (op: Correction, algorithm: AlgorithmName, keys: string[], args: Array<string | number>) => Promise<unknown>

/** The error of a reply that does not fit its call (the store resets the connection it came on). */
export type OutOfStep = (op: Correction, call: StoreCall, reply: unknown, why: string) => Error

interface Waiting {
  readonly call: StoreCall
  readonly keys: readonly string[]
  readonly args: ReadonlyArray<string | number>
  readonly resolve: () => void
  readonly reject: (error: unknown) => void
}

export class CorrectionBatcher {
  private pending = new Map<string, { op: Correction; algorithm: AlgorithmName; waiting: Waiting[] }>()
  private flushScheduled = false

  constructor(
    private readonly send: SendCorrections,
    private readonly outOfStep: OutOfStep,
    /** Send each at once, on its own. */
    private readonly unbatched: boolean,
    private readonly cluster: boolean,
  ) {}

  add(op: Correction, call: StoreCall, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<void> {
    const group = this.cluster ? `${op} ${call.algorithm} ${call.storeKey}` : `${op} ${call.algorithm}`
    let batch = this.pending.get(group)
    if (batch === undefined) {
      batch = { op, algorithm: call.algorithm, waiting: [] }
      this.pending.set(group, batch)
    }
    const { waiting } = batch
    const done = new Promise<void>((resolve, reject) => waiting.push({ call, keys, args, resolve, reject }))
    if (this.unbatched || waiting.length >= MAX_BATCH_CALLS) {
      this.pending.delete(group)
      this.sendBatch(batch.op, batch.algorithm, waiting)
    } else if (!this.flushScheduled) {
      this.flushScheduled = true
      setImmediate(this.flush)
    }
    return done
  }

  private readonly flush = (): void => {
    this.flushScheduled = false
    const batches = this.pending
    this.pending = new Map()
    for (const { op, algorithm, waiting } of batches.values()) this.sendBatch(op, algorithm, waiting)
  }

  private sendBatch(op: Correction, algorithm: AlgorithmName, waiting: readonly Waiting[]): void {
    const failAll = (error: unknown) => {
      for (const w of waiting) w.reject(error)
    }
    let reply: Promise<unknown>
    try {
      reply = this.send(
        op,
        algorithm,
        waiting.flatMap((w) => w.keys),
        correctionBatchArgs(waiting),
      )
    } catch (error) {
      failAll(error)
      return
    }
    reply.then((value) => {
      if (!Array.isArray(value) || value.length !== waiting.length) {
        failAll(this.outOfStep(op, waiting[0]!.call, value, 'is not one answer per call'))
        return
      }
      for (let i = 0; i < waiting.length; i++) {
        const { call, resolve, reject } = waiting[i]!
        const answer: unknown = value[i]
        if (answer === call.id) resolve()
        else if (Array.isArray(answer) && answer[0] === 'err')
          reject(new TollgateError(`Redis refused the ${op} of ${call.storeKey}: ${String(answer[1])}`, 'TG_STORE_ERROR'))
        else reject(this.outOfStep(op, call, answer, 'is not its call id'))
      }
    }, failAll)
  }
}
