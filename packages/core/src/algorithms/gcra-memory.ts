import { stem } from '../keys'
import type { StoreCall } from '../types'
import type { MemoryTwin } from './protocol'
import type { Windows } from './windows'

/*
 * GCRA's memory twin (gcra.ts has its Lua): the same TAT, kept exactly, per key.
 */

/**
 * A TAT, exactly: `ms + rem / max` epoch ms, with 0 ≤ rem < max. T = W / max is rarely a whole number
 * of ms (1000 / 3); rounding the TAT to a whole ms at each request lost up to 1 ms per request, which
 * cost a unit of burst (3 per second admitted 2 at once) and slowed the steady rate. Kept as two
 * integers, the arithmetic never rounds. The Lua stores the same pair as "ms:rem".
 */
interface Tat {
  readonly ms: number
  readonly rem: number
}

/** `tat + units / max` ms, exactly; `units` is negative for a refund. */
function addUnits(tat: Tat, units: number, max: number): Tat {
  const sum = tat.rem + units
  const carry = Math.floor(sum / max)
  return { ms: tat.ms + carry, rem: sum - carry * max }
}

/** True when the TAT lies after `now` (a whole ms), i.e. the bucket is not full. */
function isAfter(tat: Tat, now: number): boolean {
  return tat.ms > now || (tat.ms === now && tat.rem > 0)
}

/** The TAT as the number of ms the verdict reads (fractional, see GCRA_SCRIPT in gcra.ts). */
function tatMs(tat: Tat, max: number): number {
  return max > 0 ? tat.ms + tat.rem / max : tat.ms
}

/** The memory twin: a TAT per key, dropped once the bucket is full again. */
export function gcraMemory(windows: Windows): MemoryTwin {
  const tats = new Map<string, Tat>()
  const keyOf = (call: StoreCall, i: number) => windows.bound.keyIn(tats, stem(call, i))
  const next = (call: StoreCall, i: number): { before: Tat; after: Tat } => {
    const { max, windowMs } = call.limits[i]!
    const stored = tats.get(keyOf(call, i))
    const before = stored !== undefined && isAfter(stored, call.now) ? stored : { ms: call.now, rem: 0 }
    return { before, after: max > 0 ? addUnits(before, call.cost * windowMs, max) : before }
  }
  return {
    read(call, i, values) {
      const { max, windowMs, burst } = call.limits[i]!
      const { before, after } = next(call, i)
      values.push(tatMs(before, max), tatMs(after, max))
      // TAT − burst × T > now, multiplied through by max so that it is exact.
      return max > 0 && (after.ms - call.now) * max + after.rem <= burst * windowMs
    },
    write(call, i) {
      tats.set(keyOf(call, i), next(call, i).after)
    },
    seed(call, i, a, b, admitted) {
      // The store's TAT in ms (fractional when T is not whole), back to ms + rem / max.
      const { max } = call.limits[i]!
      const at = admitted ? b : a
      const ms = Math.floor(at)
      const tat = { ms, rem: max > 0 ? Math.min(max - 1, Math.round((at - ms) * max)) : 0 }
      const key = keyOf(call, i)
      const held = tats.get(key)
      if (isAfter(tat, call.now) && (held === undefined || tat.ms > held.ms || (tat.ms === held.ms && tat.rem > held.rem)))
        tats.set(key, tat)
    },
    refund(call, i) {
      const key = keyOf(call, i)
      const { max, windowMs } = call.limits[i]!
      const stored = tats.get(key)
      if (stored === undefined || max <= 0) return
      const back = addUnits(stored, -call.cost * windowMs, max)
      if (isAfter(back, call.now)) tats.set(key, back)
      else tats.delete(key)
    },
    settle(call, i, actual, now) {
      const { max, windowMs } = call.limits[i]!
      if (max <= 0 || now >= call.now + windowMs) return
      const key = keyOf(call, i)
      const delta = actual - call.cost
      let tat = tats.get(key)
      if (delta > 0) {
        const own = addUnits({ ms: call.now, rem: 0 }, call.cost * windowMs, max)
        if (tat === undefined || own.ms > tat.ms || (own.ms === tat.ms && own.rem > tat.rem)) tat = own
      }
      if (tat === undefined) return
      const moved = addUnits(tat, delta * windowMs, max)
      if (isAfter(moved, now)) tats.set(key, moved)
      else if (delta < 0) tats.delete(key)
    },
    forget: (call, i) => void tats.delete(stem(call, i)),
    prune(now) {
      for (const [key, tat] of tats) if (!isAfter(tat, now)) tats.delete(key)
    },
    get size() {
      return tats.size
    },
  }
}
