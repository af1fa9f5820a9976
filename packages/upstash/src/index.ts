/*
 * @tollgate/upstash: a store that counts in Redis over HTTP (the Upstash REST protocol), for runtimes
 * without TCP (Cloudflare Workers, Vercel Edge) or a Redis reached only over HTTPS.
 */
export type { UpstashClientLike } from './client'
export { UpstashStore, type UpstashStoreOptions } from './upstash-store'
