import { allFeatures } from '../features'
import { register } from '../registry'
import { Limiter as Lean } from './limiter'

// Every feature, registered when this module is loaded: an app that uses this Limiter has them all.
register(...allFeatures)

/**
 * The Limiter of "@tollgate/core" and of the adapters: every algorithm and option (see limiter.ts).
 * "@tollgate/core/lean" has the one in limiter.ts, with the features an app registers.
 */
export class Limiter<Req = unknown> extends Lean<Req> {}
