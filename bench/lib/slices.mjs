// One measured slice of an in-process micro-benchmark (hot-path.mjs, express-ip.mjs): `ops` calls of
// `run`, timed, and the heap's growth over them. A slice that saw a garbage collection is measured
// again (the bytes would be wrong), up to five times; run with --expose-gc and a large young
// generation (--min-semi-space-size=256 --max-semi-space-size=256) so that most do not.
import v8 from 'node:v8'

const turn = () => new Promise((r) => setImmediate(r))

/** ns and bytes per call of `run` over `ops` calls with no GC in between; NaN when every attempt saw one. */
export async function slice(run, ops) {
  for (let attempt = 0; attempt < 5; attempt++) {
    globalThis.gc?.()
    await turn()
    const profiler = new v8.GCProfiler() // reports every GC in the slice, synchronously
    profiler.start()
    const heap = v8.getHeapStatistics().used_heap_size
    const t0 = process.hrtime.bigint()
    for (let n = 0; n < ops; n++) run()
    const ns = Number(process.hrtime.bigint() - t0) / ops
    const bytes = (v8.getHeapStatistics().used_heap_size - heap) / ops
    if (profiler.stop().statistics.length === 0) return { ns, bytes }
  }
  return { ns: Number.NaN, bytes: Number.NaN }
}

/** The median of the numbers that are not NaN (the upper one of an even count). */
export function median(xs) {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b)
  return s.length === 0 ? Number.NaN : s[Math.floor(s.length / 2)]
}
