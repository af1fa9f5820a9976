// The public API of @tollgate/core, so an app imports from one package.
export * from '@tollgate/core'
export {
  type ClassOrMethodDecorator,
  type LimitLayer,
  RateLimit,
  RateLimitDecision,
  type RateLimitMetadata,
  SkipRateLimit,
} from './decorators'
export { RateLimitException } from './exception'
export { type RequestResponse, TOLLGATE_LIMITS, TollgateGuard } from './guard'
export { type Limit, TollgateLimits, type TollgateModuleOptions } from './limits'
export { TollgateModule, type TollgateModuleAsyncOptions } from './module'
export type { NestRequest } from './platform'
