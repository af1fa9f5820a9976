import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { getFreePort, type RedisServer, startRedisServer } from './redis-server'

/** A redis-server that also listens for TLS on `tlsPort`, with a fresh self-signed certificate (CN `cn`). */
export interface TlsRedisServer {
  readonly redis: RedisServer
  readonly tlsPort: number
  /** The server's certificate (PEM), which a client must trust explicitly. */
  readonly certFile: string
  /** Stops the server and removes the certificate. */
  stop(): Promise<void>
}

export async function startTlsRedisServer(cn: string): Promise<TlsRedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-tls-'))
  const [keyFile, certFile] = [join(dir, 'key.pem'), join(dir, 'cert.pem')]
  const subject = ['-days', '1', '-subj', `/CN=${cn}`]
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, ...subject], {
    stdio: 'ignore',
  })
  const tlsPort = await getFreePort()
  const tlsArgs = ['--tls-port', String(tlsPort), '--tls-cert-file', certFile, '--tls-key-file', keyFile]
  const redis = await startRedisServer({
    extraArgs: () => [...tlsArgs, '--tls-ca-cert-file', certFile, '--tls-auth-clients', 'no'],
  })
  return {
    redis,
    tlsPort,
    certFile,
    async stop() {
      await redis.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
