import { MemoryStore } from '@tollgate/core/lean'
import type { StoreCall, StoreResult } from '@tollgate/core/store'

/*
 * What a TollgateCounter writes to its storage so that its counts outlive the object: Cloudflare evicts an
 * idle object from memory, and restarts every object when the Worker is deployed, and a limit of a few
 * requests per hour must not start again from zero then.
 *
 * The object decides in memory, with a MemoryStore (the algorithms' memory twins); after each change it
 * stores a snapshot of the state it changed: for a call's shape (its algorithm, keys and limits) the answer
 * a read of that shape gives (a call of cost 0), which MemoryStore.seed takes back; for the fast path's
 * counter, its count. A fresh object seeds a new MemoryStore with them, oldest first, so a window that has
 * moved on since carries its count into the next as a sliding window's previous one. Seeding gives back
 * the fixed and sliding windows' counts and GCRA's arrival time exactly; the sliding log's and the
 * concurrency slots' entries come back as entries at the snapshot's time, so they leave later than they
 * would have: after a restart those two refuse a little longer, never admit more.
 *
 * Nothing lives forever: each snapshot has a time by which it is read again (its limits' longest window,
 * twice, plus a second), by an alarm; one whose state reads as a fresh store's is deleted, and the alarm
 * stops once none is left. Blocks are stored until their end.
 */

/** The part of a Durable Object's storage the counter uses. */
export interface DurableObjectStorageLike {
  list(options?: { prefix?: string }): Promise<Map<string, unknown>>
  put(key: string, value: unknown): Promise<void>
  delete(key: string): Promise<boolean>
  getAlarm(): Promise<number | null>
  setAlarm(scheduledTime: number): Promise<void>
}

/** A read of one call shape's state, as MemoryStore.seed takes it back. */
interface ShapeSnapshot {
  readonly call: StoreCall
  readonly result: StoreResult
}

/** The fast path's count of `key` in the window of `now`. */
interface CountSnapshot {
  readonly key: string
  readonly windowMs: number
  readonly now: number
  readonly count: number
}

/** A block's end. */
interface BlockSnapshot {
  readonly key: string
  readonly until: number
}

type Snapshot = ShapeSnapshot | CountSnapshot | BlockSnapshot

/** How far behind the object's clock a limiter's may be: the TTL margin of the Redis keys. */
const CLOCK_MARGIN_MS = 1000

export class Ledger {
  /** The snapshots held, by storage key, with the time each is to be read again (blocks: their end). */
  private readonly held = new Map<string, { snapshot: Snapshot; due: number }>()
  private alarmAt: number | null = null

  constructor(
    private readonly storage: DurableObjectStorageLike,
    private readonly store: MemoryStore,
  ) {}

  /** Takes back what the storage holds, oldest first (see the top of this file). */
  async load(): Promise<void> {
    const entries = [...(await this.storage.list()).entries()].filter((e): e is [string, Snapshot] => isSnapshot(e[1]))
    entries.sort((a, b) => timeOf(a[1]) - timeOf(b[1]))
    for (const [key, snapshot] of entries) {
      if ('call' in snapshot) this.store.seed(snapshot.call, snapshot.result)
      else if ('count' in snapshot) this.store.seedCount(snapshot.key, snapshot.windowMs, snapshot.now, snapshot.count)
      else this.store.block(snapshot.key, snapshot.until)
      this.held.set(key, { snapshot, due: 0 })
    }
    this.alarmAt = await this.storage.getAlarm()
    // Whatever was loaded is read again at the first alarm.
    if (entries.length > 0 && this.alarmAt === null) this.schedule(Date.now())
  }

  /** After a call changed the state of its shape: stores that shape's read, or deletes it once empty. */
  changed(call: StoreCall): void {
    const read: StoreCall = { ...call, cost: 0, id: 'snapshot' }
    this.keep(shapeKey(call), { call: read, result: this.store.admit(read) }, call.now + horizon(call))
  }

  /** After the fast path counted: stores the count. */
  counted(key: string, windowMs: number, now: number, count: number): void {
    this.keep(`c:${hash(`${key}\u0000${windowMs}`)}`, { key, windowMs, now, count }, now + 2 * windowMs + CLOCK_MARGIN_MS)
  }

  /** After `forget`: every shape is read again, since a reset of one key shows in every shape that counts it. */
  forgot(call: StoreCall): void {
    this.changed(call)
    for (const [key, { snapshot }] of this.held) if (!('until' in snapshot)) this.refresh(key, snapshot, call.now)
  }

  /** After a block: stored until its end (`until`, 0 when it had ended by `now`). */
  blocked(key: string, until: number, now: number): void {
    if (until > now) this.keep(`b:${hash(key)}`, { key, until }, until)
    else this.unblocked(key)
  }

  unblocked(key: string): void {
    this.drop(`b:${hash(key)}`)
  }

  /** The alarm: reads again every snapshot that is due, deletes those that are empty, and sets the next alarm. */
  expire(now: number): void {
    this.alarmAt = null
    const at = now - CLOCK_MARGIN_MS
    this.store.prune(at)
    for (const [key, { snapshot, due }] of this.held) if (due <= now) this.refresh(key, snapshot, at)
    let next = Number.POSITIVE_INFINITY
    for (const { due } of this.held.values()) next = Math.min(next, due)
    if (next !== Number.POSITIVE_INFINITY) this.schedule(next)
  }

  /** A snapshot read again at `now`: kept with a new read, or dropped when there is nothing left to keep. */
  private refresh(key: string, snapshot: Snapshot, now: number): void {
    if ('until' in snapshot) {
      if (snapshot.until <= now) this.drop(key)
    } else if ('call' in snapshot) {
      this.changed({ ...snapshot.call, now: Math.max(now, snapshot.call.now) })
    } else {
      const at = Math.max(now, snapshot.now)
      this.counted(snapshot.key, snapshot.windowMs, at, this.store.countOf(snapshot.key, snapshot.windowMs, at))
    }
  }

  private keep(key: string, snapshot: Snapshot, due: number): void {
    if (isEmpty(snapshot)) {
      this.drop(key)
      return
    }
    this.held.set(key, { snapshot, due })
    // Not awaited: the object's output gate holds its answer until the write is durable.
    void this.storage.put(key, snapshot)
    if (this.alarmAt === null || this.alarmAt > due) this.schedule(due)
  }

  private drop(key: string): void {
    if (this.held.delete(key)) void this.storage.delete(key)
  }

  private schedule(at: number): void {
    this.alarmAt = at
    void this.storage.setAlarm(at)
  }
}

/** True when a snapshot holds nothing a fresh store would not: the state it stands for has ended. */
function isEmpty(snapshot: Snapshot): boolean {
  if ('until' in snapshot) return false
  if ('count' in snapshot) return snapshot.count === 0
  const fresh = new MemoryStore({ sweepIntervalMs: 0 }).admit(snapshot.call)
  return fresh.allowed === snapshot.result.allowed && fresh.values.every((v, i) => v === snapshot.result.values[i])
}

/** How long a call's state can matter: a sliding window reads the window before, GCRA at most its window. */
function horizon(call: StoreCall): number {
  let longest = 0
  for (const limit of call.limits) longest = Math.max(longest, limit.windowMs * Math.max(1, limit.burst / Math.max(1, limit.max)))
  return 2 * longest + CLOCK_MARGIN_MS
}

/** One storage key per call shape: what the call's state is, not when or how much. */
function shapeKey(call: StoreCall): string {
  const limits = call.limits.map((l) => [l.max, l.windowMs, l.burst, l.label, l.keyed === true])
  return `s:${hash(JSON.stringify([call.algorithm, call.storeKey, call.stems ?? null, limits]))}`
}

function timeOf(snapshot: Snapshot): number {
  return 'call' in snapshot ? snapshot.call.now : 'now' in snapshot ? snapshot.now : 0
}

function isSnapshot(value: unknown): value is Snapshot {
  return value !== null && typeof value === 'object' && ('call' in value || 'count' in value || 'until' in value)
}

/**
 * FNV-1a over 64 bits, as hex: storage keys of a fixed length, whatever the length of the client keys
 * (a storage key is limited to 2 KiB). An object holds a handful of shapes, so a collision is out of reach.
 */
function hash(text: string): string {
  let h = 0xcbf29ce484222325n
  for (let i = 0; i < text.length; i++) h = BigInt.asUintN(64, (h ^ BigInt(text.charCodeAt(i))) * 0x100000001b3n)
  return h.toString(16).padStart(16, '0')
}
