import { type AlgorithmName, type Decision, Limiter, type LimiterOptions, type Store } from '@tollgate/core'

// The scenario of per-limit keys every store runs: two users of one tenant, each user at most 5 and the
// tenant at most 8 per minute, 20 requests of each user at once.

export const USER_MAX = 5
export const TENANT_MAX = 8
export const PER_USER = 20
export const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'sliding-log']

/** A request of the scenario: who sent it and for which tenant. */
export interface TenantRequest {
  user: string
  tenant: string
}

/** A limiter of a user's 5 per minute within their tenant's 8 per minute, on `store`, at a fixed time. */
export function tenantLimiter(
  store: Store,
  prefix: string,
  options: Partial<LimiterOptions<TenantRequest>> = {},
  now = 1_800_000_000_000 + 1000,
): Limiter<TenantRequest> {
  return new Limiter<TenantRequest>({
    key: (req) => `user:${req.user}`,
    limits: [
      { max: USER_MAX, window: '1m' },
      { max: TENANT_MAX, window: '1m', key: (req) => `tenant:${req.tenant}` },
    ],
    store,
    prefix,
    clock: () => now,
    ...options,
  })
}

/** Sends PER_USER requests of each user at once; the decisions by user. */
export async function burstOfTwoUsers(limiter: Limiter<TenantRequest>, tenant = 'acme'): Promise<Record<string, Decision[]>> {
  const users = ['ann', 'bob']
  const all = await Promise.all(
    Array.from({ length: PER_USER * users.length }, (_, i) => limiter.check({ user: users[i % 2]!, tenant }) as Promise<Decision>),
  )
  return { ann: all.filter((_, i) => i % 2 === 0), bob: all.filter((_, i) => i % 2 === 1) }
}

export function admitted(decisions: readonly Decision[]): number {
  return decisions.filter((d) => d.allowed).length
}
