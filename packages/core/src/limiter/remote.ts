import type { Feature } from '../registry'
import { MirrorCells } from './fast-path/mirror-cells'
import { OverLimit } from './fast-path/over-limit'
import { StoreResilience } from './resilience'

/** What a limiter needs of a store outside its process (registry.ts, `remote`): read by limiter.ts and increment-path.ts. */
export interface RemoteKit {
  /** Circuits per store node and the fallback's mirror of the store's counts. */
  readonly Resilience: typeof StoreResilience
  /** The fast path's copy of each client's last count, handed to the fallback before it decides. */
  readonly MirrorCells: typeof MirrorCells
  /** The fast path's refusals without a round trip, for clients already over the limit. */
  readonly OverLimit: typeof OverLimit
}

/**
 * A store outside the process (`local` not true): its deadline's failures, circuits and fallback, and the
 * fast path's caches. RedisStore and Tollgate's other remote stores register it themselves when made; a
 * store of your own that is not local needs `register(remoteStores)` with the lean Limiter.
 */
export const remoteStores: Feature = {
  name: 'remoteStores',
  install: (kit) => {
    kit.remote = { Resilience: StoreResilience, MirrorCells, OverLimit } satisfies RemoteKit
  },
}
