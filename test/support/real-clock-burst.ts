import { setTimeout as sleep } from 'node:timers/promises'

/*
 * The demo burst against a server that reads the real clock (a runtime in a process of its own, where no
 * clock can be injected): its requests are sent from the start of a second, 5 ms in as startOfSecond()
 * stands for Express, so that they all fall in one window of the default one-second limit. Within one
 * window the fields are those of the fixed clock: `t` and Retry-After are whole seconds rounded up, 1
 * anywhere in the second.
 */

/**
 * Runs `burst` from the start of a second and returns what it returned, once it ran within that one
 * second. A run that ended in a later second (a machine stalled mid-burst) says nothing about the limit:
 * it runs again from the start of a later second, in a window of its own; at most `attempts` times.
 */
export async function withinOneSecond<T>(burst: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    await sleep(1000 - (Date.now() % 1000) + 5)
    const second = Math.floor(Date.now() / 1000)
    const result = await burst()
    if (Math.floor(Date.now() / 1000) === second) return result
    if (attempt === attempts) throw new Error(`no burst of ${attempts} fitted in one second: the machine is too busy for this test`)
  }
}
