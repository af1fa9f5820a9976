/**
 * Lets a background timer (a sweep, an idle check) never keep the process alive: Node's and Bun's
 * timers are objects with `unref()`; Deno's are numbers, unref'd with `Deno.unrefTimer`; where neither
 * exists (workerd, browsers) nothing holds a process open, and there is nothing to do.
 */
export function unrefTimer(timer: unknown): void {
  if (typeof timer === 'object' && timer !== null) (timer as { unref?(): void }).unref?.()
  else if (typeof timer === 'number') (globalThis as { Deno?: { unrefTimer?(id: number): void } }).Deno?.unrefTimer?.(timer)
}
