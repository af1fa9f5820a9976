import { createConnection, createServer, type Server, type Socket } from 'node:net'

/*
 * A TCP proxy in front of a test's own redis-server, for faults a real network makes and a server
 * process cannot: one connection that silently stops forwarding (a half-open socket, as after a NAT or
 * a firewall drops its state), bytes that no command asked for (a broken proxy's extra reply), and a
 * connection cut after Redis has run a command but before its reply arrives. It listens on 127.0.0.1
 * only and ends every socket it opened on close().
 */

/** One client connection through the proxy and its connection to the server. */
export class ProxiedConnection {
  /** Bytes the client sent, in order, as text (RESP is text enough to search for a command or a call id). */
  sent = ''
  private held = false
  private cutOnReply = false
  private before: string | undefined
  private readonly ended: Promise<void>

  constructor(
    readonly client: Socket,
    readonly server: Socket,
  ) {
    this.ended = new Promise((resolve) => client.once('close', () => resolve()))
    client.on('data', (chunk: Buffer) => {
      if (this.held) return
      this.sent += chunk.toString('latin1')
      server.write(chunk)
    })
    server.on('data', (chunk: Buffer) => {
      if (this.held) return
      if (this.cutOnReply) {
        // Redis has run what it answers here; the client never hears it.
        this.destroy()
        return
      }
      if (this.before !== undefined) {
        client.write(this.before)
        this.before = undefined
      }
      client.write(chunk)
    })
    const end = () => this.destroy()
    client.on('close', end)
    server.on('close', end)
    client.on('error', () => {})
    server.on('error', () => {})
  }

  /** Stops forwarding both ways without closing either socket: the client sees a live, silent peer. */
  blackhole(): void {
    this.held = true
  }

  /**
   * Forwards until the server's next bytes have reached the client, then stops forwarding both ways
   * (blackhole): a connection whose first exchange works and that goes silent right after it.
   */
  blackholeAfterReply(): void {
    // Runs after the constructor's listener, registered first, has forwarded those bytes.
    this.server.once('data', () => this.blackhole())
  }

  /** Writes `bytes` to the client as if the server had sent them. */
  inject(bytes: string): void {
    this.client.write(bytes)
  }

  /** Writes `bytes` to the client just ahead of the server's next bytes: a reply the server never sent, first in line. */
  injectBeforeNextReply(bytes: string): void {
    this.before = bytes
  }

  /** The next bytes the server sends are dropped and both sockets closed: what was sent ran, its reply is lost. */
  cutOnNextReply(): void {
    this.cutOnReply = true
  }

  destroy(): void {
    this.client.destroy()
    this.server.destroy()
  }

  /** Resolves once the client's side of the connection has closed (by either end). */
  closed(): Promise<void> {
    return this.ended
  }

  get isClosed(): boolean {
    return this.client.destroyed
  }
}

export interface TcpProxy {
  readonly host: '127.0.0.1'
  readonly port: number
  /** Every connection accepted so far, in the order they came, open or closed. */
  readonly connections: ProxiedConnection[]
  /** Resolves with the next connection accepted (or the n-th, counted from 0, if it came already). */
  connection(index: number): Promise<ProxiedConnection>
  close(): Promise<void>
}

/** A proxy on a free 127.0.0.1 port forwarding every connection to `target`. */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const connections: ProxiedConnection[] = []
  const waiters: Array<{ index: number; resolve: (c: ProxiedConnection) => void }> = []
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: target.host, port: target.port })
    upstream.setNoDelay(true)
    client.setNoDelay(true)
    const proxied = new ProxiedConnection(client, upstream)
    connections.push(proxied)
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.index < connections.length) {
        waiters[i]!.resolve(connections[waiters[i]!.index]!)
        waiters.splice(i, 1)
      }
    }
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const address = server.address()
  if (address === null || typeof address !== 'object') throw new Error('the proxy has no port')
  return {
    host: '127.0.0.1',
    port: address.port,
    connections,
    connection(index) {
      const known = connections[index]
      if (known !== undefined) return Promise.resolve(known)
      return new Promise((resolve) => waiters.push({ index, resolve }))
    },
    close() {
      for (const c of connections) c.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}
