/*
 * "@tollgate/core/adapter": what adapter packages build on. The response sequence lives in gate.ts,
 * once: an adapter supplies only its framework's I/O (ResponseIO) and calls the gate for each request;
 * fetch-gate.ts is that I/O for the Fetch API's Request and Response, whole.
 */

export { AdaptiveFront, admitFetch, admitOn, type ClosingResponse, nodeMiddleware, Permit, type ShedResponse } from './adaptive/front'
export type { AdaptiveGate, Priority } from './adaptive/gate'
export type { LimitAlgorithmName } from './adaptive/limits'
export type { AdaptiveConcurrencyOptions } from './adaptive/options'
export { isObject, type MethodDecorator, methodDecorator, missingRequest } from './decorators'
export { invalidOption } from './errors'
export { type FetchReply, fetchGate, withHeaders } from './fetch-gate'
export { forwardedIp, runtimeIp } from './fetch-ip'
export { createGate, type Gate, type RefusalHandler, type ResponseIO } from './gate'
export { lowerHeaderName } from './headers'
export type { Limiter } from './limiter/limiter'
export type { NodeResponseLike, Rejection } from './limiter/response'
export { adapterChoice, adapterFunction } from './options/checks'
export { nestedOptions } from './options/nested-options'
export type { AdapterHooks, Decision, MaybePromise } from './types'
export { isThenable } from './types'
export { firstVisit, recordDecision } from './visits'
