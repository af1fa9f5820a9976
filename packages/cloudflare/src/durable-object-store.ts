import { type Duration, parseDuration, register, remoteStores, TollgateError } from '@tollgate/core/lean'
import type { Store, StoreCall, StoreResult } from '@tollgate/core/store'
import { type DurableObjectStubLike, ObjectBatch } from './object-batch'
import { keyOf, type Operation, ownerOf } from './wire'

/**
 * The part of a `DurableObjectNamespace` binding the store uses (`env.TOLLGATE`), declared structurally so
 * that this package needs neither @cloudflare/workers-types nor a Worker to be type-checked or tested.
 */
export interface DurableObjectNamespaceLike {
  idFromName(name: string): unknown
  get(id: unknown): DurableObjectStubLike
}

export interface DurableObjectStoreOptions {
  /** The Durable Object namespace bound to `TollgateCounter` in the Worker's configuration, e.g. `env.TOLLGATE`. */
  namespace: DurableObjectNamespaceLike
  /**
   * Deadline for one store call. A reply later than this is ignored and the limiter applies its
   * `onStoreError` policy instead of holding the request. An object lives where it was first used: from
   * another region, a call is a round trip across it.
   * @default "500ms"
   */
  timeout?: Duration
}

const OPTION_KEYS = ['namespace', 'timeout']

/**
 * Counts in Cloudflare Durable Objects: one object per client key (per hash tag), which decides every call
 * on its keys one at a time with the memory store's algorithms, so the decisions are exact across every
 * Worker instance and match the other stores'. One request to the object per store call, or per batch
 * of the calls made to it together (object-batch.ts).
 */
export class DurableObjectStore implements Store {
  readonly local = false
  /**
   * The keys of one call must share their hash tag, since one object owns them: a limiter with per-limit
   * keys needs a `hashTag`, as with a Redis Cluster.
   */
  readonly cluster = true
  readonly timeoutMs: number
  private readonly namespace: DurableObjectNamespaceLike
  /** The batch being filled for each object, by its name, until the current synchronous run ends. */
  private readonly batches = new Map<string, ObjectBatch>()

  constructor(options: DurableObjectStoreOptions) {
    // What a limiter needs of a store outside its process, for the lean Limiter of @tollgate/web too.
    register(remoteStores)
    if (options === null || typeof options !== 'object') {
      throw new TollgateError(
        `Invalid DurableObjectStore options: expected an object like { namespace: env.TOLLGATE }, got ${options === null ? 'null' : typeof options}`,
        'TG_INVALID_OPTION',
      )
    }
    for (const name of Object.keys(options)) {
      if (!OPTION_KEYS.includes(name)) {
        throw new TollgateError(
          `Unknown DurableObjectStore option "${name}"; known options: ${OPTION_KEYS.join(', ')}`,
          'TG_UNKNOWN_OPTION',
        )
      }
    }
    const { namespace } = options
    if (
      namespace === null ||
      typeof namespace !== 'object' ||
      typeof namespace.idFromName !== 'function' ||
      typeof namespace.get !== 'function'
    ) {
      throw new TollgateError(
        'Invalid option "namespace": expected the Durable Object namespace bound to TollgateCounter (env.TOLLGATE, with ' +
          `idFromName() and get()), got ${namespace === null ? 'null' : typeof namespace}`,
        'TG_INVALID_OPTION',
      )
    }
    this.namespace = namespace
    this.timeoutMs = parseDuration('timeout', options.timeout ?? '500ms')
  }

  async admit(call: StoreCall): Promise<StoreResult> {
    const result = (await this.send({ op: 'admit', call })) as StoreResult | null
    if (result === null || typeof result !== 'object' || typeof result.allowed !== 'boolean' || !Array.isArray(result.values)) {
      throw new TollgateError(
        `Durable Object store call failed: the answer to admit is not a decision (${JSON.stringify(result)})`,
        'TG_STORE_ERROR',
      )
    }
    return result
  }

  async refund(call: StoreCall): Promise<void> {
    await this.send({ op: 'refund', call })
  }

  async settle(call: StoreCall, actualCost: number, now: number): Promise<void> {
    if (actualCost !== call.cost) await this.send({ op: 'settle', call, actualCost, now })
  }

  async forget(call: StoreCall): Promise<void> {
    await this.send({ op: 'forget', call })
  }

  /** The single fixed window's fast path: the same counters as `admit`, in the same object. */
  async increment(key: string, cost: number, windowMs: number, now: number): Promise<number> {
    return Number(await this.send({ op: 'increment', key, cost, windowMs, now }))
  }

  async blockedUntil(key: string, now: number): Promise<number> {
    return Number(await this.send({ op: 'blockedUntil', key, now }))
  }

  async block(key: string, until: number, now: number): Promise<void> {
    await this.send({ op: 'block', key, until, now })
  }

  async unblock(key: string): Promise<void> {
    await this.send({ op: 'unblock', key })
  }

  /** The operation sent to the object that owns its key, in this run's batch for it, under this store's deadline. */
  private send(operation: Operation): Promise<unknown> {
    const owner = ownerOf(keyOf(operation))
    let batch = this.batches.get(owner)
    if (batch === undefined) {
      const { namespace } = this
      batch = new ObjectBatch(
        () => namespace.get(namespace.idFromName(owner)),
        () => this.batches.delete(owner),
      )
      this.batches.set(owner, batch)
    }
    return withDeadline(batch.send(operation), this.timeoutMs)
  }
}

/** `promise`, or a TG_STORE_TIMEOUT rejection after `ms`. */
function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TollgateError(`the Durable Object did not answer within ${ms} ms`, 'TG_STORE_TIMEOUT')), ms)
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}
