import { invalidOption } from './errors'

type Unit =
  | 'ms'
  | 'millisecond'
  | 'milliseconds'
  | 's'
  | 'sec'
  | 'secs'
  | 'second'
  | 'seconds'
  | 'm'
  | 'min'
  | 'mins'
  | 'minute'
  | 'minutes'
  | 'h'
  | 'hr'
  | 'hrs'
  | 'hour'
  | 'hours'
  | 'd'
  | 'day'
  | 'days'

/** A number of milliseconds, or a string such as `"1s"`, `"500ms"`, `"1 minute"`, `"2h"`. */
export type Duration = number | `${number}${Unit}` | `${number} ${Unit}`

const UNIT_MS: Record<string, number> = {
  ms: 1,
  millisecond: 1,
  milliseconds: 1,
  s: 1000,
  sec: 1000,
  secs: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hr: 3_600_000,
  hrs: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
}

const DURATION_RE = /^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$/i
const EXPECTED = 'a positive whole number of ms or a duration like "1s", "500ms", "1 minute"'

/**
 * Parses a duration option once, at construction. Whole milliseconds only: a window of 1.5 ms
 * would make window indexes ambiguous between processes.
 */
export function parseDuration(name: string, value: unknown): number {
  let ms: number | undefined
  if (typeof value === 'number') ms = value
  else if (typeof value === 'string') {
    const match = DURATION_RE.exec(value)
    const factor = match ? UNIT_MS[match[2]!.toLowerCase()] : undefined
    if (match && factor !== undefined) ms = Number(match[1]) * factor
  }
  if (ms === undefined || !Number.isSafeInteger(ms) || ms <= 0) throw invalidOption(name, EXPECTED, value)
  return ms
}

/** A short label for a window, used in policy names: 1000 → "1s", 60000 → "1m", 1500 → "1500ms". */
export function formatDuration(ms: number): string {
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000}d`
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`
  if (ms % 60_000 === 0) return `${ms / 60_000}m`
  if (ms % 1000 === 0) return `${ms / 1000}s`
  return `${ms}ms`
}

/** Human wording for messages: 1000 → "1 second", 60000 → "1 minute". */
export function describeDuration(ms: number): string {
  const units: Array<[number, string]> = [
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
    [1000, 'second'],
  ]
  for (const [size, word] of units) {
    if (ms % size === 0) {
      const n = ms / size
      return `${n} ${word}${n === 1 ? '' : 's'}`
    }
  }
  return `${ms} milliseconds`
}
