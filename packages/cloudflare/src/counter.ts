import { MemoryStore } from '@tollgate/core/lean'
import { type DurableObjectStorageLike, Ledger } from './ledger'
import type { Answer, Operation } from './wire'

/** The part of a Durable Object's state the counter uses. */
export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>
}

const JSON_HEADERS = { 'content-type': 'application/json' }

/**
 * The Durable Object class that keeps Tollgate's counts: export it from the Worker and bind a namespace to
 * it (`TOLLGATE`), which DurableObjectStore calls. One object owns the keys of one client key (one hash
 * tag) and handles one call at a time, so every call on those keys is decided atomically, whichever
 * Worker instance sends it. It decides with a MemoryStore, the algorithms' memory twins, so its answers are
 * the memory store's and the Redis store's for the same calls; and it stores what it needs to survive a
 * restart, each entry deleted by an alarm once its windows have passed (ledger.ts). The object runs the
 * Worker's own script, so it has the algorithms the script registers at its top level (or all of them, with
 * the Limiter of @tollgate/core): it registers nothing itself, which would hand every feature to the lean
 * limiters of its isolate, and their bundle.
 */
export class TollgateCounter {
  private readonly store: MemoryStore
  private readonly ledger: Ledger

  constructor(state: DurableObjectStateLike, _env?: unknown) {
    this.store = new MemoryStore({ sweepIntervalMs: 0 })
    this.ledger = new Ledger(state.storage, this.store)
    // No call is decided before the counts stored by an earlier instance are back.
    void state.blockConcurrencyWhile(() => this.ledger.load())
  }

  /** A batch of operations (object-batch.ts), decided in order: an answer each, an error failing its own call only. */
  async fetch(request: Request): Promise<Response> {
    let operations: unknown
    try {
      operations = JSON.parse(await request.text())
    } catch {
      operations = undefined
    }
    if (!Array.isArray(operations)) return reply([{ error: 'the request body is not a JSON array of operations' }], 400)
    return reply(operations.map((operation: Operation) => this.answer(operation)))
  }

  /** Reads again what is due, drops what has ended, and sets the next alarm while anything is left. */
  alarm(): void {
    this.ledger.expire(Date.now())
  }

  private answer(operation: Operation): Answer {
    try {
      return { result: this.run(operation) }
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) }
    }
  }

  /** One operation, decided synchronously: nothing else runs on this object between its read and its write. */
  private run(o: Operation): unknown {
    const { store, ledger } = this
    switch (o.op) {
      case 'admit': {
        const result = store.admit(o.call)
        if (result.allowed && o.call.cost > 0) ledger.changed(o.call)
        return result
      }
      case 'refund':
        store.refund(o.call)
        return ledger.changed(o.call)
      case 'settle':
        store.settle(o.call, o.actualCost, o.now)
        return ledger.changed(o.call)
      case 'forget':
        store.forget(o.call)
        return ledger.forgot(o.call)
      case 'increment': {
        const count = store.increment(o.key, o.cost, o.windowMs, o.now)
        ledger.counted(o.key, o.windowMs, o.now, count)
        return count
      }
      case 'blockedUntil':
        return store.blockedUntil(o.key, o.now)
      case 'block':
        store.block(o.key, o.until)
        return ledger.blocked(o.key, store.blockedUntil(o.key, o.now), o.now)
      case 'unblock':
        store.unblock(o.key)
        return ledger.unblocked(o.key)
      default:
        throw new Error(`unknown operation ${JSON.stringify((o as { op?: unknown }).op)}`)
    }
  }
}

function reply(body: Answer[], status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: JSON_HEADERS })
}
