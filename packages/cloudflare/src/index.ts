/*
 * @tollgate/cloudflare: a store on Cloudflare Durable Objects. The app's Worker exports TollgateCounter and
 * binds a Durable Object namespace to it; DurableObjectStore sends each store call to the object that owns
 * the call's client key.
 */
export { type DurableObjectStateLike, TollgateCounter } from './counter'
export { type DurableObjectNamespaceLike, DurableObjectStore, type DurableObjectStoreOptions } from './durable-object-store'
export type { DurableObjectStorageLike } from './ledger'
export type { DurableObjectResponseLike, DurableObjectStubLike } from './object-batch'
