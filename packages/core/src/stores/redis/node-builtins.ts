/*
 * The Node built-ins of RedisStore's opt-in transports ("direct", "own-connection": node:net, node:tls,
 * node:diagnostics_channel), taken when a store asks for such a transport rather than imported. Bundlers
 * resolve every import of a file before they drop the code an app does not use, so one import of a Node
 * built-in anywhere under core's main entry fails a bundle for workerd or the browser, even for an app
 * that never builds a RedisStore. process.getBuiltinModule (Node 20.16, Bun, Deno) loads a built-in
 * synchronously and out of the bundlers' sight; on an older Node it is imported in the background, and
 * the transport that needs it waits for it as for a connection that is not ready yet.
 */

type BuiltinName = 'node:net' | 'node:tls' | 'node:diagnostics_channel'

const loaded = new Map<BuiltinName, unknown>()
const loading = new Set<BuiltinName>()

/** The built-in `name`, or undefined while it loads (or where the runtime has none: its transport then stays unused). */
export function nodeBuiltin<T>(name: BuiltinName): T | undefined {
  const known = loaded.get(name)
  if (known !== undefined) return known as T
  const process = (globalThis as { process?: { getBuiltinModule?(id: string): unknown } }).process
  if (typeof process?.getBuiltinModule === 'function') {
    const module = process.getBuiltinModule(name)
    if (module !== undefined) loaded.set(name, module)
    return module as T | undefined
  }
  if (!loading.has(name)) {
    loading.add(name)
    const specifier: string = name
    import(/* webpackIgnore: true */ /* @vite-ignore */ specifier).then(
      (module: unknown) => loaded.set(name, module),
      () => {},
    )
  }
  return undefined
}

type DiagnosticsChannel = typeof import('node:diagnostics_channel')
type Channel = ReturnType<DiagnosticsChannel['channel']>

const channels = new Map<string, Channel>()

/**
 * Whether a tracer listens on the diagnostics channel `name` (one of ioredis's traces). True while the
 * module loads, so that the caller keeps to the client's own path until it knows.
 */
export function traced(name: string): boolean {
  let channel = channels.get(name)
  if (channel === undefined) {
    const dc = nodeBuiltin<DiagnosticsChannel>('node:diagnostics_channel')
    if (dc === undefined) return true
    channel = dc.channel(name)
    channels.set(name, channel)
  }
  return channel.hasSubscribers
}

/**
 * Starts loading the sockets' modules for the store's own connection. On a Node without
 * process.getBuiltinModule they load in the background: started when the store first sees the client,
 * they are there by the time the client is ready and the connection opens.
 */
export function preloadSockets(): void {
  nodeBuiltin('node:net')
  nodeBuiltin('node:tls')
}
