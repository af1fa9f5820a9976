// Core's main entry is what an app uses (the stores, the error and its codes, the limiter behind the
// middleware, the types its options and decisions are made of), so all of it is re-exported and an app
// imports from this package alone. A store author imports @tollgate/core/store, an adapter author
// @tollgate/core/adapter.
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
