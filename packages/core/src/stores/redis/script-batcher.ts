import { ALGORITHMS, batchArgs, keysOf, MAX_BATCH_SEQUENCE } from '../../algorithms'
import type { AlgorithmName, StoreCall, StoreResult } from '../../types'
import { TurnBatches } from './turn-batches'

/*
 * The script algorithms' admits of one event-loop turn, sent together: one script call per batch
 * (algorithms/protocol.ts), where one EVALSHA per admit cost Redis several times the fixed window's
 * transaction per decision. A batch holds calls of one algorithm and, on a Cluster, of one client key
 * (its hash tag): a script's keys must share one slot, and while a slot migrates, a script whose keys are
 * only partly moved is refused (TRYAGAIN) where one of a single client's keys, which move together, is
 * redirected and runs; a batch across clients would fail them all for the whole migration. Batches are numbered in the order they are sent, which is the order a
 * connection runs them: the record of exactly once is one bit per batch and key (protocol.ts).
 */

/** What the store sends a batch with: the algorithm's admit script on `keys` and `args`, under its deadline. */
export type SendBatch = (algorithm: AlgorithmName, keys: string[], args: Array<string | number>) => Promise<unknown>
/**
 * The answers of a batch from its reply (script-replies.ts batchResults), or a failure for every call;
 * `shared(i)` says whether call i has a key another call of the batch has too.
 */
export type ReadBatch = (calls: readonly StoreCall[], reply: unknown, shared: (i: number) => boolean) => Array<StoreResult | Error>

interface Waiting {
  readonly call: StoreCall
  readonly keys: readonly string[]
  readonly resolve: (result: StoreResult) => void
  readonly reject: (error: unknown) => void
}

class Batch {
  readonly waiting: Waiting[] = []
  readonly keys: string[] = []
  /** Calls per key, for `shared`. */
  private readonly calls = new Map<string, number>()

  constructor(readonly algorithm: AlgorithmName) {}

  get size(): number {
    return this.waiting.length
  }

  add(waiting: Waiting): void {
    this.waiting.push(waiting)
    for (const key of waiting.keys) {
      this.calls.set(key, (this.calls.get(key) ?? 0) + 1)
      this.keys.push(key)
    }
  }

  /** True when call `i` has a key another call of this batch has too. */
  readonly shared = (i: number): boolean => this.waiting[i]!.keys.some((key) => this.calls.get(key)! > 1)
}

export class ScriptBatcher {
  /** The batches being filled, per algorithm and, on a Cluster, client key. */
  private readonly batches: TurnBatches<Waiting, Batch>
  private sequence = 0
  /** Names this store's records in the keys it writes (protocol.ts): one field per store instance. */
  readonly instance = Math.random().toString(36).slice(2, 10)

  constructor(
    private readonly send: SendBatch,
    private readonly read: ReadBatch,
    /** Send each admit at once, on its own. */
    unbatched: boolean,
    /** A Cluster: a batch holds one client key's calls (see the top of this file). */
    private readonly cluster: boolean,
  ) {
    this.batches = new TurnBatches(
      (first) => new Batch(first.call.algorithm),
      (batch) => this.sendBatch(batch),
      unbatched,
    )
  }

  admit(call: StoreCall): Promise<StoreResult> {
    const keys = keysOf(ALGORITHMS[call.algorithm], call)
    const group = this.cluster ? `${call.algorithm} ${call.storeKey}` : call.algorithm
    return new Promise<StoreResult>((resolve, reject) => this.batches.add(group, { call, keys, resolve, reject }))
  }

  private sendBatch(batch: Batch): void {
    const { waiting } = batch
    const calls = waiting.map((w) => w.call)
    this.sequence = this.sequence >= MAX_BATCH_SEQUENCE ? 1 : this.sequence + 1
    let reply: Promise<unknown>
    try {
      reply = this.send(batch.algorithm, batch.keys, batchArgs(this.instance, this.sequence, calls))
    } catch (error) {
      for (const w of waiting) w.reject(error)
      return
    }
    reply.then(
      (value) => {
        let results: Array<StoreResult | Error>
        try {
          results = this.read(calls, value, batch.shared)
        } catch (error) {
          for (const w of waiting) w.reject(error)
          return
        }
        for (let i = 0; i < waiting.length; i++) {
          const result = results[i]!
          if (result instanceof Error) waiting[i]!.reject(result)
          else waiting[i]!.resolve(result)
        }
      },
      (error) => {
        for (const w of waiting) w.reject(error)
      },
    )
  }
}
