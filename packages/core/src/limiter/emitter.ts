/*
 * The listener methods of Node's EventEmitter that a limiter offers (`on`, `once`, `off` and their
 * long names, `emit`, `listeners`, `listenerCount`, `removeAllListeners`), with its semantics: listeners
 * run synchronously in the order they were added, a listener added twice runs twice, `off` removes
 * the one added last, and what a listener throws reaches the caller of `emit`. Written here rather than
 * imported from node:events so that core loads on every runtime with Web APIs.
 */

/**
 * A listener of a limiter's events: each event passes one value (the decision, the error, the node).
 * Its arguments are typed as EventEmitter types them, so a listener written for one keeps compiling.
 */
// biome-ignore lint/suspicious/noExplicitAny: EventEmitter's listener type, for the listeners apps already have
export type Listener = (...args: any[]) => unknown

type Entry = { listener: Listener; once: boolean }

export class Emitter {
  private readonly entries = new Map<string | symbol, Entry[]>()

  /** Adds `listener` for `event`. */
  on(event: string | symbol, listener: Listener): this {
    return this.add(event, listener, false)
  }

  /** Same as `on`. */
  addListener(event: string | symbol, listener: Listener): this {
    return this.add(event, listener, false)
  }

  /** Adds `listener` for the next `event` only. */
  once(event: string | symbol, listener: Listener): this {
    return this.add(event, listener, true)
  }

  /** Removes `listener` from `event` (the one added last, when it was added more than once). */
  off(event: string | symbol, listener: Listener): this {
    const list = this.entries.get(event)
    if (list === undefined) return this
    for (let i = list.length - 1; i >= 0; i--) {
      if (list[i]!.listener === listener) return this.remove(event, list[i]!)
    }
    return this
  }

  /** Same as `off`. */
  removeListener(event: string | symbol, listener: Listener): this {
    return this.off(event, listener)
  }

  /** Removes every listener of `event`, or of every event. */
  removeAllListeners(event?: string | symbol): this {
    const events = event === undefined ? [...this.entries.keys()] : [event]
    for (const e of events) if (this.entries.delete(e)) this.listenersChanged(e)
    return this
  }

  /** Calls the listeners of `event` with `args`; true when it had any. */
  emit(event: string | symbol, ...args: unknown[]): boolean {
    const list = this.entries.get(event)
    if (list === undefined) return false
    // The list as it was: a listener that adds or removes listeners changes the next emit, not this one.
    for (const entry of list) {
      if (entry.once) this.remove(event, entry)
      entry.listener.apply(this, args)
    }
    return true
  }

  /** The listeners of `event`, in order. */
  listeners(event: string | symbol): Listener[] {
    return (this.entries.get(event) ?? []).map((e) => e.listener)
  }

  /** How many listeners `event` has. */
  listenerCount(event: string | symbol): number {
    return this.entries.get(event)?.length ?? 0
  }

  /** The events that have listeners. */
  eventNames(): (string | symbol)[] {
    return [...this.entries.keys()]
  }

  /** Called after listeners of `event` were added or removed. */
  protected listenersChanged(_event: string | symbol): void {}

  private remove(event: string | symbol, entry: Entry): this {
    const list = this.entries.get(event)?.filter((e) => e !== entry) ?? []
    if (list.length === 0) this.entries.delete(event)
    else this.entries.set(event, list)
    this.listenersChanged(event)
    return this
  }

  private add(event: string | symbol, listener: Listener, once: boolean): this {
    if (typeof listener !== 'function') throw new TypeError(`The "listener" argument must be a function, got ${typeof listener}`)
    // A new array each time: an emit in progress keeps iterating the one it started with.
    this.entries.set(event, [...(this.entries.get(event) ?? []), { listener, once }])
    this.listenersChanged(event)
    return this
  }
}
