import { createParamDecorator, type ExecutionContext } from '@nestjs/common'
import type { LimiterOptions } from '@tollgate/core'
import { adapterChoice, type Decision } from '@tollgate/core/adapter'
import type { NestRequest } from './platform'

export const RATE_LIMIT = 'tollgate:rateLimit'
export const SKIP_RATE_LIMIT = 'tollgate:skipRateLimit'

/** The layers of limits the guard stacks, outermost first. */
export type LimitLayer = 'module' | 'class' | 'method'
export const LAYERS: readonly LimitLayer[] = ['module', 'class', 'method']

/**
 * The metadata one `@RateLimit(options)` call leaves on what it decorates. One call, one limit: the
 * limiter is built once for this object (cached by it), so a decorator applied to two methods shares
 * one counter, as one Express middleware mounted twice does.
 */
export interface RateLimitMetadata {
  readonly options: unknown
  /** `Class` or `Class.method` of the first place it decorated: names the limit's key prefix and its errors. */
  scope: string
}

// biome-ignore lint/suspicious/noExplicitAny: the platform's request (Express or fastify), typed by the app's own options
type AnyRequest = any

/** A legacy (experimentalDecorators) decorator for classes and methods, as Nest's own. */
export type ClassOrMethodDecorator = (target: object, key?: string | symbol, descriptor?: PropertyDescriptor) => void

function nameOf(target: object, key: string | symbol | undefined): string {
  const cls = typeof target === 'function' ? target : target.constructor
  return key === undefined ? cls.name : `${cls.name}.${String(key)}`
}

/**
 * A limit of a controller class or method, stacked on the module's (and a method's on its class's):
 * each counts the request once and shows in the RateLimit headers. It counts the module's way (store,
 * key, algorithm, headers...) with its own `max`, `window`, `limits`, `burst`, `name`, `prefix` and
 * `shadow`, under a key prefix of its own; give it a `store` (or any other option) to override.
 * Its options are validated when the app initializes.
 */
export function RateLimit<Req = AnyRequest>(options: LimiterOptions<Req> = {}): ClassOrMethodDecorator {
  const metadata: RateLimitMetadata = { options, scope: '' }
  return (target, key, descriptor) => {
    if (metadata.scope === '') metadata.scope = nameOf(target, key)
    Reflect.defineMetadata(RATE_LIMIT, metadata, descriptor === undefined ? target : descriptor.value)
  }
}

/**
 * Lets the requests of a controller class or method through without counting them: every limit
 * (no argument), or only the named layers, e.g. `@SkipRateLimit('module')` for a method that has a
 * limit of its own instead of the module's. On a method it adds to what its class skips.
 */
export function SkipRateLimit(...layers: LimitLayer[]): ClassOrMethodDecorator {
  for (const layer of layers) adapterChoice('SkipRateLimit', layer, LAYERS, 'module')
  const skipped = layers.length === 0 ? LAYERS : layers
  return (target, _key, descriptor) => {
    Reflect.defineMetadata(SKIP_RATE_LIMIT, skipped, descriptor === undefined ? target : descriptor.value)
  }
}

/** The request's decisions, read the way the guard wrote them. */
export function decisionsOf(req: unknown): Decision[] {
  return (req as NestRequest | undefined)?.rateLimits ?? []
}

/**
 * A handler parameter holding the request's rate-limit decision: the last limit's (`@RateLimitDecision()`),
 * or every limit's in order with `@RateLimitDecision('all')`. Undefined (or []) when no limit ran.
 */
export const RateLimitDecision = createParamDecorator((which: 'last' | 'all' | undefined, context: ExecutionContext) => {
  const all = decisionsOf(context.switchToHttp().getRequest())
  return which === 'all' ? all : all.at(-1)
})
