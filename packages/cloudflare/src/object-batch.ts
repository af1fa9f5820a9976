import { TollgateError } from '@tollgate/core/lean'
import type { Answer, Operation } from './wire'

/*
 * The calls to one Durable Object made in one synchronous run (a burst of calls, a batch of a limiter's),
 * sent together in one request when it ends, in the order they were made: the object decides them in that
 * order, as a Redis connection would (so concurrent increments of a key get the counts 1, 2, 3... in the
 * order they were asked for), and a burst costs one request instead of one per call. A batch is never held
 * back for an earlier one still on its way: in a Worker, a request's I/O belongs to that request, and a
 * request may not wait on another's; the calls of different requests have no order to keep anyway.
 */

/** The part of a Durable Object stub the store uses. */
export interface DurableObjectStubLike {
  fetch(url: string, init: { method: 'POST'; body: string; headers: Record<string, string> }): Promise<DurableObjectResponseLike>
}

/** What a Durable Object stub's `fetch` answers: the part of a `Response` the store reads. */
export interface DurableObjectResponseLike {
  readonly ok: boolean
  readonly status: number
  text(): Promise<string>
}

interface Waiting {
  readonly operation: Operation
  readonly resolve: (result: unknown) => void
  readonly reject: (error: unknown) => void
}

/** Operations in one request at most: a request, and the object's turn on it, stay short. */
const MAX_BATCH = 256
/** Where the object's answers come from; never resolved on the network, only by a stub. */
const OBJECT_URL = 'https://tollgate.durable-object/'
const HEADERS = { 'content-type': 'application/json' }

export class ObjectBatch {
  private readonly waiting: Waiting[] = []

  constructor(
    private readonly stub: () => DurableObjectStubLike,
    /** Called when the batch goes, so the store starts a new one for the next calls. */
    private readonly sent: () => void,
  ) {
    queueMicrotask(this.flush)
  }

  /** The object's answer to `operation`, decided after the calls added to this batch before it. */
  send(operation: Operation): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => this.waiting.push({ operation, resolve, reject }))
  }

  private readonly flush = (): void => {
    this.sent()
    for (let at = 0; at < this.waiting.length; at += MAX_BATCH) this.post(this.waiting.slice(at, at + MAX_BATCH))
  }

  private post(batch: Waiting[]): void {
    const body = JSON.stringify(batch.map((w) => w.operation))
    let answered: Promise<DurableObjectResponseLike>
    try {
      answered = this.stub().fetch(OBJECT_URL, { method: 'POST', body, headers: HEADERS })
    } catch (error) {
      answered = Promise.reject(error)
    }
    answered
      .then(async (response) => answersOf(await response.text(), response.status, batch.length))
      .then(
        (answers) => {
          for (let i = 0; i < batch.length; i++) {
            const a = answers[i]!
            if ('error' in a) batch[i]!.reject(new TollgateError(`Durable Object store call failed: ${a.error}`, 'TG_STORE_ERROR'))
            else batch[i]!.resolve(a.result)
          }
        },
        (error: unknown) => {
          const failure = storeError(error)
          for (const w of batch) w.reject(failure)
        },
      )
  }
}

/** The object's answers to a batch, or why they are not: a reply that does not fit its calls is never read as counts. */
function answersOf(text: string, status: number, expected: number): Answer[] {
  let answers: unknown
  try {
    answers = JSON.parse(text)
  } catch {
    throw new TollgateError(`Durable Object store call failed: HTTP ${status}: ${text.slice(0, 200)}`, 'TG_STORE_ERROR')
  }
  if (!Array.isArray(answers) || answers.length !== expected || !answers.every((a) => a !== null && typeof a === 'object')) {
    throw new TollgateError(
      `Durable Object store call failed: HTTP ${status}: the answer is not ${expected} answers (${text.slice(0, 200)})`,
      'TG_STORE_ERROR',
    )
  }
  return answers as Answer[]
}

function storeError(error: unknown): TollgateError {
  if (error instanceof TollgateError) return error
  const message = error instanceof Error ? error.message : String(error)
  return new TollgateError(`Durable Object store call failed: ${message}`, 'TG_STORE_ERROR', { cause: error })
}
