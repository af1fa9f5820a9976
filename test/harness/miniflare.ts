import { join } from 'node:path'
import type { DurableObjectNamespaceLike } from '@tollgate/cloudflare'
import { build, type Plugin } from 'esbuild'
import { Miniflare } from 'miniflare'

/*
 * A Worker in workerd (Cloudflare's runtime, run by Miniflare) for the Durable Object store's tests: the
 * test Worker (test/stores/durable-object/worker.ts) bundled from the sources, as an app's bundler would,
 * with its Durable Object classes bound. Miniflare starts workerd as a child process of its own on a free
 * port, on 127.0.0.1, and `dispose()` ends it.
 */

const ROOT = join(__dirname, '..', '..')
const WORKER = join(ROOT, 'test', 'stores', 'durable-object', 'worker.ts')

/** The bindings of the test Worker: the real counter, one that never answers, and one whose storage a test can list. */
export const BINDINGS = { TOLLGATE: 'TollgateCounter', SILENT: 'SilentCounter', INSPECTED: 'InspectedCounter' } as const

/**
 * `node:perf_hooks`, which this workerd does not have, as the global `performance` every Web runtime has:
 * until core's main entry imports no Node built-in, a Worker bundle of it needs this much.
 */
const webBuiltins: Plugin = {
  name: 'web-builtins',
  setup(b) {
    b.onResolve({ filter: /^node:perf_hooks$/ }, (args) => ({ path: args.path, namespace: 'web-builtins' }))
    b.onLoad({ filter: /.*/, namespace: 'web-builtins' }, () => ({
      contents: 'export const performance = globalThis.performance',
      loader: 'js',
    }))
  },
}

let bundled: Promise<string> | undefined

/** The test Worker as one ES module, bundled once per test file. */
function bundle(): Promise<string> {
  bundled ??= build({
    entryPoints: [WORKER],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    mainFields: ['module', 'main'],
    // The packages resolve to their sources through the root tsconfig's paths, as in the rest of the tests.
    tsconfig: join(ROOT, 'tsconfig.json'),
    // workerd provides Node's built-ins under nodejs_compat, for the parts of core that still import them;
    // the one it lacks is given from the Web API it stands for.
    external: ['node:*'],
    plugins: [webBuiltins],
    write: false,
    logLevel: 'silent',
  }).then((result) => result.outputFiles[0]!.text)
  return bundled
}

export interface Workerd {
  readonly miniflare: Miniflare
  /** A Durable Object namespace of the Worker, reached from this process through Miniflare. */
  namespace(binding: keyof typeof BINDINGS): Promise<DurableObjectNamespaceLike>
  dispose(): Promise<void>
}

/** Starts the test Worker; with `persist`, its Durable Objects' storage lives in that folder, across restarts. */
export async function startWorkerd(options: { persist?: string } = {}): Promise<Workerd> {
  const miniflare = new Miniflare({
    modules: true,
    script: await bundle(),
    compatibilityDate: '2025-07-01',
    compatibilityFlags: ['nodejs_compat', 'enable_nodejs_http_modules'],
    durableObjects: { ...BINDINGS },
    // What the Worker logs (core's debug lines among it) is not the test's output; workerd's errors still are.
    handleRuntimeStdio(stdout, stderr) {
      stdout.resume()
      stderr.pipe(process.stderr)
    },
    ...(options.persist === undefined ? {} : { durableObjectsPersist: options.persist }),
  })
  await miniflare.ready
  return {
    miniflare,
    namespace: async (binding) => (await miniflare.getDurableObjectNamespace(binding)) as unknown as DurableObjectNamespaceLike,
    dispose: () => miniflare.dispose(),
  }
}
