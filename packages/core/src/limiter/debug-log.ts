/**
 * `NODE_DEBUG=tollgate`, read once, as Node's util.debuglog reads it: with the log off, a decision and
 * a store call pay one branch for it and build no string. Read here rather than through node:util so
 * that core loads where there is no Node; a runtime without `process`, or one that denies reading the
 * environment (Deno without --allow-env), has the log off.
 */
export const DEBUG = debugEnabled('tollgate')

function debugEnabled(name: string): boolean {
  let setting: string | undefined
  try {
    setting = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.NODE_DEBUG
  } catch {
    return false
  }
  // util.debuglog's rule: a comma-separated list of names, case-insensitive, "*" matching anything.
  return (setting ?? '').split(',').some((entry) => {
    const pattern = entry
      .trim()
      .replace(/[|\\{}()[\]^$+?.]/g, '\\$&')
      .replace(/\*/g, '.*')
    return pattern !== '' && new RegExp(`^${pattern}$`, 'i').test(name)
  })
}

/** One line of the debug log, on stderr, in util.debuglog's form: `TOLLGATE <pid>: <message>`. */
export function debug(message: string): void {
  console.error(`TOLLGATE ${(globalThis as { process?: { pid?: number } }).process?.pid}: ${message}`)
}
