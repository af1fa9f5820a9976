import type { AlgorithmName } from '../types'
import type { AlgorithmScripts } from './algorithm'
import { fixedWindowScripts } from './fixed-window'
import { gcraScripts } from './gcra'
import { concurrencyScripts, slidingLogScripts } from './log-scripts'
import { slidingWindowScripts } from './sliding-window'

/*
 * Each algorithm's Lua, for the stores that run scripts (RedisStore). Only they import this file: the
 * algorithms themselves (algorithm.ts) carry none, so an app on the memory store, bundled for a Worker or an
 * edge function, carries none either. Each algorithm's Lua is built once, at the first store that asks.
 */

const BUILDERS: Readonly<Record<AlgorithmName, () => AlgorithmScripts>> = {
  'fixed-window': fixedWindowScripts,
  'sliding-window': slidingWindowScripts,
  gcra: gcraScripts,
  'sliding-log': slidingLogScripts,
  concurrency: concurrencyScripts,
}

const built = new Map<AlgorithmName, AlgorithmScripts>()

/** The Lua of algorithm `name`. */
export function scriptsOf(name: AlgorithmName): AlgorithmScripts {
  let scripts = built.get(name)
  if (scripts === undefined) {
    scripts = BUILDERS[name]()
    built.set(name, scripts)
  }
  return scripts
}
