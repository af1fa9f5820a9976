import { correctionBatchArgs } from '../../algorithms/correction-batch'
import { TollgateError } from '../../errors'
import type { AlgorithmName, StoreCall } from '../../types'
import { TurnBatches } from './turn-batches'

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
  readonly op: Correction
  readonly call: StoreCall
  readonly keys: readonly string[]
  readonly args: ReadonlyArray<string | number>
  readonly resolve: () => void
  readonly reject: (error: unknown) => void
}

class Batch {
  readonly waiting: Waiting[] = []

  constructor(
    readonly op: Correction,
    readonly algorithm: AlgorithmName,
  ) {}

  get size(): number {
    return this.waiting.length
  }

  add(waiting: Waiting): void {
    this.waiting.push(waiting)
  }
}

export class CorrectionBatcher {
  private readonly batches: TurnBatches<Waiting, Batch>

  constructor(
    private readonly send: SendCorrections,
    private readonly outOfStep: OutOfStep,
    /** Send each at once, on its own. */
    unbatched: boolean,
    private readonly cluster: boolean,
  ) {
    this.batches = new TurnBatches(
      (first) => new Batch(first.op, first.call.algorithm),
      (batch) => this.sendBatch(batch.op, batch.algorithm, batch.waiting),
      unbatched,
    )
  }

  add(op: Correction, call: StoreCall, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<void> {
    const group = this.cluster ? `${op} ${call.algorithm} ${call.storeKey}` : `${op} ${call.algorithm}`
    return new Promise<void>((resolve, reject) => this.batches.add(group, { op, call, keys, args, resolve, reject }))
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
