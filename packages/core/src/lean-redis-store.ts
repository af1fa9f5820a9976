import { remoteStores } from './limiter/remote'
import { register } from './registry'
import { type RedisStoreOptions, RedisStore as Store } from './stores/redis/store'

/**
 * The RedisStore of "@tollgate/core/lean": the store itself (stores/redis/store.ts), which, when made,
 * registers what a limiter needs of a store outside its process (remoteStores), so an app on the lean
 * Limiter registers nothing to use Redis.
 */
export class RedisStore extends Store {
  constructor(options: RedisStoreOptions) {
    register(remoteStores)
    super(options)
  }
}
