/** Stable codes carried by every error Tollgate throws or reports. */
export type TollgateErrorCode =
  | 'TG_INVALID_OPTION'
  | 'TG_UNKNOWN_OPTION'
  | 'TG_INVALID_REQUEST_VALUE'
  | 'TG_STORE_TIMEOUT'
  | 'TG_STORE_ERROR'
  | 'TG_DECORATOR_NO_REQUEST'
  | 'TG_DECORATOR_TARGET'

export class TollgateError extends Error {
  override readonly name = 'TollgateError'
  /** The message without its `[code]` suffix, for a caller that adds context of its own. */
  readonly detail: string
  constructor(
    message: string,
    readonly code: TollgateErrorCode,
    options?: { cause?: unknown },
  ) {
    super(`${message} [${code}]`, options)
    this.detail = message
  }
}

/** Renders a value for an error message: the value and its type, never "[object Object]". */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return `${JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value)} (string)`
  if (typeof value === 'function') return `a function (function)`
  if (value === null) return 'null'
  if (Array.isArray(value)) return `an array of ${value.length} (array)`
  if (typeof value === 'object') {
    let text: string
    try {
      text = JSON.stringify(value) ?? String(value)
    } catch {
      text = String(value)
    }
    return `${text.length > 80 ? `${text.slice(0, 80)}…` : text} (object)`
  }
  return `${String(value)} (${typeof value})`
}

export function invalidOption(name: string, expected: string, value: unknown): TollgateError {
  return new TollgateError(`Invalid option "${name}": expected ${expected}, got ${describeValue(value)}`, 'TG_INVALID_OPTION')
}

/**
 * Rejects a key of `options` that is not in `known` (a typo such as `windowMS` must not silently
 * become the default). `where` names the options object ("" for a limiter's own, "MemoryStore"...);
 * `hint` may suggest the option the caller probably meant.
 */
export function rejectUnknown(where: string, options: object, known: readonly string[], hint?: (name: string) => string | undefined): void {
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue
    const guess = hint?.(name)
    throw new TollgateError(
      `Unknown ${where ? `${where} ` : ''}option "${name}"${guess ? ` (did you mean "${guess}"?)` : ''}; known options: ${known.join(', ')}`,
      'TG_UNKNOWN_OPTION',
    )
  }
}
