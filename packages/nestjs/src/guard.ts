import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common'
import { TollgateError } from '@tollgate/core'
import { isThenable, type MaybePromise } from '@tollgate/core/adapter'
import { LAYERS, type LimitLayer, RATE_LIMIT, type RateLimitMetadata, SKIP_RATE_LIMIT } from './decorators'
import { RateLimitException } from './exception'
import type { Limit, TollgateLimits } from './limits'
import { type NestRequest, takeRefusal } from './platform'

/** Provider token of the module's TollgateLimits (the built limits TollgateGuard applies). */
export const TOLLGATE_LIMITS = Symbol.for('tollgate:limits')

/** The request and response of an execution context, as `getRequestResponse` returns them. */
export interface RequestResponse {
  req: object
  /** The platform's response (Express `res`, fastify `reply`); without one, no headers are set. */
  res?: object
}

type Handler = (...args: never[]) => unknown
type Layer = { layer: LimitLayer; limit: Limit }

function metadataOf<T>(key: string, target: object): T | undefined {
  return Reflect.getMetadata(key, target) as T | undefined
}

/**
 * Applies the module's limit, then the controller class's `@RateLimit`, then the method's, each
 * counted once per request and each in the RateLimit headers; `@SkipRateLimit` leaves layers out.
 * A refusal sets the headers on the response and throws a RateLimitException (429) for Nest's
 * exception filters. Bound globally by the module (`globalGuard`, the default) or with `@UseGuards(TollgateGuard)`.
 *
 * For GraphQL resolvers (or any context that is not HTTP), extend it and override `getRequestResponse`.
 */
export class TollgateGuard implements CanActivate {
  /** The limits of each handler, per class (a method inherited by two controllers meets two class limits). */
  private readonly layers = new WeakMap<Handler, WeakMap<object, Layer[]>>()

  constructor(protected readonly limits: TollgateLimits) {}

  canActivate(context: ExecutionContext): MaybePromise<boolean> {
    const layers = this.layersOf(context.getClass(), context.getHandler() as Handler)
    if (layers.length === 0) return true
    const pair = this.getRequestResponse(context)
    if (pair === undefined || pair.req === undefined || pair.req === null) {
      // The module's limit is for HTTP; a decorated handler reached where no request is found is an error, never a silent pass.
      const decorated = layers.find((l) => l.layer !== 'module')
      if (decorated === undefined) return true
      throw new TollgateError(
        `@RateLimit on ${context.getClass().name}.${context.getHandler().name} found no HTTP request in a "${context.getType()}" context: extend TollgateGuard and override getRequestResponse(context) to return { req, res } (see the GraphQL example in the @tollgate/nestjs README)`,
        'TG_INVALID_REQUEST_VALUE',
      )
    }
    // No response object (a GraphQL context without `res`): a stand-in, so a refusal still has a place to wait for the guard.
    return this.run(layers, 0, pair.req as NestRequest, pair.res ?? {})
  }

  /**
   * The request and response the limits apply to. The default reads an HTTP context (platform-express
   * or platform-fastify) and returns undefined for any other; a GraphQL guard returns the request and
   * response of the GraphQL context.
   */
  protected getRequestResponse(context: ExecutionContext): RequestResponse | undefined {
    if (context.getType() !== 'http') return undefined
    const http = context.switchToHttp()
    return { req: http.getRequest(), res: http.getResponse() }
  }

  private run(layers: Layer[], from: number, req: NestRequest, res: object): MaybePromise<boolean> {
    for (let i = from; i < layers.length; i++) {
      const go = layers[i]!.limit.gate(req, res, undefined)
      if (isThenable(go)) return go.then((ok) => (ok ? this.run(layers, i + 1, req, res) : this.refuse(res)))
      if (!go) return this.refuse(res)
    }
    return true
  }

  private refuse(res: object): never {
    const refusal = takeRefusal(res)
    if (refusal === undefined) throw new Error('Tollgate: a refused request left no rejection (a bug: please report it)')
    throw new RateLimitException(refusal.rejection, refusal.decision)
  }

  /** The limits that apply to a handler of a class, in order, minus the skipped layers. Built once per handler and class. */
  private layersOf(cls: object, handler: Handler): Layer[] {
    let byClass = this.layers.get(handler)
    if (byClass === undefined) {
      byClass = new WeakMap()
      this.layers.set(handler, byClass)
    }
    let layers = byClass.get(cls)
    if (layers === undefined) {
      const skipped = new Set([
        ...(metadataOf<LimitLayer[]>(SKIP_RATE_LIMIT, cls) ?? []),
        ...(metadataOf<LimitLayer[]>(SKIP_RATE_LIMIT, handler) ?? []),
      ])
      const own = { class: metadataOf<RateLimitMetadata>(RATE_LIMIT, cls), method: metadataOf<RateLimitMetadata>(RATE_LIMIT, handler) }
      layers = []
      for (const layer of LAYERS) {
        if (skipped.has(layer)) continue
        if (layer === 'module') layers.push({ layer, limit: this.limits.module })
        else if (own[layer] !== undefined) layers.push({ layer, limit: this.limits.of(own[layer]) })
      }
      byClass.set(cls, layers)
    }
    return layers
  }
}

// Nest's decorators, applied as functions: this package is compiled without experimentalDecorators.
Injectable()(TollgateGuard)
Inject(TOLLGATE_LIMITS)(TollgateGuard, undefined, 0)
