// What an app needs from core, so it imports from this package alone: the stores, the error and its
// codes, the limiter behind the middleware, and the types its options and decisions are made of.
// Writing a store or another adapter takes @tollgate/core itself (its protocol types and ./testing).
export * from '@tollgate/core'
export { type AdaptiveConcurrencyMiddleware, type AdaptiveConcurrencyOptions, adaptiveConcurrency, type Priority } from './adaptive'
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
