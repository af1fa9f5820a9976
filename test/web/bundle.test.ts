import { builtinModules } from 'node:module'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { build, type Metafile } from 'esbuild'
import { distDir, REPO_ROOT } from '../harness/built-packages'

// What an app on a runtime without Node gets (workerd, Deno Deploy, a browser): its entry bundled from
// the BUILT packages for the browser platform, as wrangler and Next.js's edge build do, with no
// polyfill. Nothing Node-only may be on the path of an app on the memory store: esbuild fails on any
// import of a Node built-in, static or dynamic, even in code it would drop as unused. The optional peer
// dependencies stay outside (an app that does not install @opentelemetry/api gets this bundle; its
// import() then fails softly at run time).

const OPTIONAL_PEERS = ['@opentelemetry/api', 'ioredis', 'redis']
const NODE_BUILTINS = new Set(builtinModules.flatMap((name) => [name, `node:${name}`]))

interface Bundle {
  text: string
  gzipped: number
  minified: number
  metafile: Metafile
}

async function bundle(entry: string): Promise<Bundle> {
  const result = await build({
    stdin: { contents: entry, resolveDir: REPO_ROOT, loader: 'js' },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    minify: true,
    write: false,
    metafile: true,
    logLevel: 'silent',
    external: OPTIONAL_PEERS,
  })
  const output = result.outputFiles[0]!.contents
  return { text: result.outputFiles[0]!.text, minified: output.length, gzipped: gzipSync(output).length, metafile: result.metafile }
}

/** Every import of a Node built-in in the bundle's inputs, as "<file> → <module>". */
function nodeImports(metafile: Metafile): string[] {
  return Object.entries(metafile.inputs).flatMap(([file, input]) =>
    input.imports.filter((i) => NODE_BUILTINS.has(i.path) || i.path.startsWith('node:')).map((i) => `${file} → ${i.path}`),
  )
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`

describe('core bundled for the browser platform', () => {
  const core = join(distDir('@tollgate/core'), 'index.js')
  let limiter: Bundle

  beforeAll(async () => {
    limiter = await bundle(
      `import { Limiter, MemoryStore } from ${JSON.stringify(core)}\nexport const limiter = new Limiter({ max: 10, store: new MemoryStore() })`,
    )
    console.log(`@tollgate/core, a Limiter on the memory store: ${kb(limiter.minified)} minified, ${kb(limiter.gzipped)} gzipped`)
  })

  it('imports no Node built-in on the path of an app on the memory store', () => {
    expect(nodeImports(limiter.metafile)).toEqual([])
  })

  // Found in RedisStore's own code only: its option errors, and the client method its scripts go through.
  const REDIS_STORE = /Invalid RedisStore options|defineCommand/

  it('leaves RedisStore out of an app that does not use it', () => {
    expect(limiter.text).not.toMatch(REDIS_STORE)
  })

  it('bundles RedisStore as well, with no Node built-in to resolve', async () => {
    const redis = await bundle(`export { RedisStore } from ${JSON.stringify(core)}`)
    expect(redis.text).toMatch(REDIS_STORE)
    expect(nodeImports(redis.metafile)).toEqual([])
  })
})
