import type { Config } from '../options/parse-options'
import { type Decision, isThenable, type MaybePromise } from '../types'

/** The store calls timed in `tollgate.store.duration`, as its `tollgate.operation` attribute names them. */
export type StoreOperation =
  | 'increment'
  | 'admit'
  | 'refund'
  | 'settle'
  | 'forget'
  | 'block'
  | 'blocked_until'
  | 'unblock'
  | 'lease'
  | 'end_lease'

/**
 * What a limiter tells the outside about its work, as the counting path sees it: the `decision` event
 * always, and, with the metrics feature registered, OpenTelemetry metrics and the `NODE_DEBUG=tollgate`
 * log (telemetry.ts). Free when nothing wants them: a decision pays one comparison (`wake`), a store call
 * one branch (`start`).
 */
export interface Telemetry {
  /** Decisions at or after this time (limiter clock) ask `wants`. */
  readonly wake: number
  /** Whether the limiter has `decision` listeners now. */
  listen(listening: boolean): void
  /** Called before a decision at `now` is made, when `now >= wake`: whether it is to be reported. */
  wants(now: number): boolean
  /** Reports a decision (once it is made, for a promise); returns it as it came. */
  decided(decision: MaybePromise<Decision>): MaybePromise<Decision>
  /** The start of a timed store call, or -1 when store calls are not timed. */
  start(): number
  /** A store call's result; its duration and outcome are recorded when it settles (`started` ≥ 0, from `start`). */
  settle<T>(operation: StoreOperation, storeKey: string, started: number, result: MaybePromise<T>): MaybePromise<T>
  /** Calls the store (`call`), timed when store calls are. */
  timed<T>(operation: StoreOperation, storeKey: string, call: () => MaybePromise<T>): MaybePromise<T>
  /** A timed store call that threw instead of returning. */
  threw(operation: StoreOperation, storeKey: string, started: number, error: unknown): void
}

/** The factory the Limiter makes its telemetry with: the metrics feature's, or DecisionEvents. */
export type TelemetryMaker = new (
  config: Config<unknown>,
  emit: (event: string, value?: unknown) => void,
  degradedNodes: () => number,
) => Telemetry

/** The `decision` event alone: the telemetry of a limiter without the metrics feature. Store calls are never timed. */
export class DecisionEvents implements Telemetry {
  wake = Number.POSITIVE_INFINITY
  private listening = false

  constructor(
    _config: Config<unknown>,
    private readonly emit: (event: string, value?: unknown) => void,
  ) {}

  listen(listening: boolean): void {
    this.listening = listening
    this.wake = listening ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY
  }

  wants(): boolean {
    return this.listening
  }

  decided(decision: MaybePromise<Decision>): MaybePromise<Decision> {
    return isThenable(decision) ? decision.then((d) => this.report(d)) : this.report(decision)
  }

  start(): number {
    return -1
  }

  settle<T>(_operation: StoreOperation, _storeKey: string, _started: number, result: MaybePromise<T>): MaybePromise<T> {
    return result
  }

  timed<T>(_operation: StoreOperation, _storeKey: string, call: () => MaybePromise<T>): MaybePromise<T> {
    return call()
  }

  threw(): void {}

  private report(d: Decision): Decision {
    if (this.listening) this.emit('decision', d)
    return d
  }
}
