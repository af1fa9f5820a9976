import { Logger as NestLogger } from '@nestjs/common'
import { Limiter, type LimiterOptions, type Logger, TollgateError } from '@tollgate/core'
import { type AdapterHooks, createGate, type Decision, type Gate, invalidOption, isThenable, nestedOptions } from '@tollgate/core/adapter'
import { expressIp } from '@tollgate/express/internal'
import type { RateLimitMetadata } from './decorators'
import { io, keepRefusal, type NestRequest } from './platform'

/** The options of `TollgateModule.forRoot`: the limiter options of every adapter, plus where the guard runs. */
// biome-ignore lint/suspicious/noExplicitAny: the platform's request (Express or fastify), typed by the app
export interface TollgateModuleOptions<Req = any> extends LimiterOptions<Req> {
  /**
   * Registers TollgateGuard as a global guard (APP_GUARD): the module's limit covers every route, and
   * `@RateLimit` works on any controller. `false`: the guard runs only where `@UseGuards(TollgateGuard)` puts it.
   * @default true
   */
  globalGuard?: boolean
}

/** Options of the module that only the Nest adapter reads. */
const ADAPTER_KEYS = ['globalGuard']

/** One limit, built once: its limiter and the gate that applies it to a request. */
export interface Limit {
  readonly limiter: Limiter<NestRequest>
  readonly gate: Gate<NestRequest, object, undefined>
}

const USE_TRUST = `trust only your proxies: on platform-express app.set('trust proxy', <number of proxies or their addresses>), on platform-fastify new FastifyAdapter({ trustProxy: '<proxy addresses>' })`

/**
 * Finds a proxy header the platform does not trust, once for the module and its decorated limits.
 * Express's `trust proxy` setting is readable from the request; fastify's is not, so there only an
 * untrusted X-Forwarded-For is reported.
 */
function nestHooks(): AdapterHooks<NestRequest> {
  let reported = false
  return {
    // On platform-express req.ip's address without the cost of Express's getter; fastify's request.ip as it is.
    ip: (req) => expressIp(req),
    diagnose(req) {
      if (reported) return null
      const r = req as NestRequest & { app?: { get?(name: string): unknown }; socket?: { remoteAddress?: string } }
      let found: string | null | undefined
      if (typeof r.app?.get === 'function' && r.app.get('trust proxy') === true) {
        found = `Express "trust proxy" is true, so req.ip is the leftmost X-Forwarded-For entry, which any client can write: a client that varies it is never limited; ${USE_TRUST}.`
      } else if (req.headers['x-forwarded-for'] === undefined) found = undefined
      else if (r.ip !== r.socket?.remoteAddress)
        found = null // a trusted proxy's header resolved the IP
      else
        found = `a request carried X-Forwarded-For but the platform does not trust proxies, so every client behind the proxy shares one limit; ${USE_TRUST}.`
      reported = found !== undefined
      return found
    },
  }
}

/** Core's warnings through Nest's logger (so `logger: false` and custom Nest loggers apply). */
function nestLogger(): Logger {
  const logger = new NestLogger('Tollgate')
  return {
    warn: (message) => logger.warn(message),
    error: (message, error) => logger.error(message, error instanceof Error ? error.stack : error),
  }
}

function globalGuardOption(value: unknown): boolean {
  if (value === undefined || typeof value === 'boolean') return value !== false
  throw invalidOption('globalGuard', 'true or false', value)
}

/** A refusal leaves its rejection on the response for the guard to throw (headers and status are already set). */
function refuse(req: NestRequest, res: object, decision: Decision, limiter: Limiter<NestRequest>) {
  const rejection = limiter.rejection(req, decision)
  if (isThenable(rejection)) return rejection.then((r) => keepRefusal(res, { rejection: r, decision }))
  keepRefusal(res, { rejection, decision })
}

/**
 * The module's limit and the limits of `@RateLimit`, each built once (options validated then), as
 * the module provides them to TollgateGuard.
 */
export class TollgateLimits {
  /** The module's own limit: its limiter's events (`limited`, `storeError`, `fallback`, `recover`), `consume`, `peek`, `reset`. */
  readonly module: Limit
  readonly globalGuard: boolean
  private readonly options: TollgateModuleOptions
  private readonly hooks = nestHooks()
  private readonly decorated = new WeakMap<RateLimitMetadata, Limit>()
  /** Every limiter built, for close(). */
  private readonly limiters = new Set<Limiter<NestRequest>>()

  constructor(options: TollgateModuleOptions = {}) {
    // Anything but an object goes to the limiter as it is, for core's own message.
    const plain = options !== null && typeof options === 'object' && [Object.prototype, null].includes(Object.getPrototypeOf(options))
    this.options = plain ? { ...options, logger: options.logger ?? nestLogger() } : options
    this.module = this.build(this.options)
    this.globalGuard = globalGuardOption(options.globalGuard)
  }

  /** The limit of one `@RateLimit`, built the first time it is asked for. Throws a TollgateError naming the decorated class or method. */
  of(metadata: RateLimitMetadata): Limit {
    let limit = this.decorated.get(metadata)
    if (limit === undefined) {
      const option = `@RateLimit" of "${metadata.scope}`
      const parent = this.module.limiter.config
      const merged = nestedOptions<TollgateModuleOptions>(this.options, metadata.options, {
        parentPrefix: parent.prefix,
        scope: metadata.scope,
        option,
      })
      // The module's store instance unless the decorator names one: the prefix keeps the counts apart.
      merged.store ??= parent.store
      try {
        limit = this.build(merged)
      } catch (error) {
        if (!(error instanceof TollgateError)) throw error
        throw new TollgateError(`@RateLimit on ${metadata.scope}: ${error.detail}`, error.code, { cause: error })
      }
      this.decorated.set(metadata, limit)
    }
    return limit
  }

  /** Closes every limiter built (`limiter.close()`: a `lease` gives back what this process holds). */
  async close(): Promise<void> {
    await Promise.all([...this.limiters].map((limiter) => limiter.close()))
  }

  private build(options: TollgateModuleOptions): Limit {
    const limiter = new Limiter<NestRequest>(options, this.hooks, ADAPTER_KEYS)
    this.limiters.add(limiter)
    return { limiter, gate: createGate(limiter, io, (req, res, decision) => refuse(req, res, decision, limiter)) }
  }
}
