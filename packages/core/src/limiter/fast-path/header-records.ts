import { policyParts, secondsLeft } from '../../headers'
import type { Decision, Policy } from '../../types'

/** Policies whose records are kept; past it (a `max` function with many values), records are built per request. */
const MAX_POLICIES = 256

/** Slots of the header records kept per policy (a power of two). */
const SLOTS = 256

/** The header records of one policy, by slot: each slot's record and the values it was built for. */
interface PolicyRecords {
  policy: Policy
  /** The policy's draft-8 `RateLimit-Policy` value and the start of its `RateLimit` value. */
  item: string
  head: string
  records: (Record<string, string> | undefined)[]
  remaining: Float64Array
  t: Float64Array
  reset: Float64Array
}

function recordsOf(d: Decision): PolicyRecords {
  const { item, head } = policyParts(d)
  return {
    policy: d.policy,
    item,
    head,
    records: new Array(SLOTS).fill(undefined),
    remaining: new Float64Array(SLOTS).fill(-1),
    t: new Float64Array(SLOTS),
    reset: new Float64Array(SLOTS),
  }
}

/**
 * The header records of allowed requests under one limit, kept. Such a record depends only on the
 * policy, `remaining`, the seconds to the reset and (legacy headers) the reset's epoch second, so
 * records are kept per policy in SLOTS slots chosen by `remaining`: requests of many clients with the
 * same quota left, and each of a client's requests once its count repeats a value in that second, reuse
 * one record and build no string. A miss costs a slot compare and builds the record as before. A record
 * handed out is shared, so never modified.
 */
export class HeaderRecords {
  private readonly policies = new Map<Policy, PolicyRecords>()
  private last: PolicyRecords | undefined

  constructor(
    /**
     * An allowed request under one limit gets exactly the two draft-8 fields (the defaults, or
     * headersOn 'allowed'): its record is built here as one object literal, not by `build`.
     */
    private readonly draft8: boolean,
    private readonly legacyHeaders: boolean,
    /** The general builder, for every other record. */
    private readonly build: (decisions: readonly Decision[]) => Record<string, string>,
  ) {}

  /** The record of an allowed request under one limit, decided by `d`. */
  of(d: Decision): Readonly<Record<string, string>> {
    let q = this.last
    if (q === undefined || q.policy !== d.policy) {
      q = this.policies.get(d.policy)
      if (q === undefined) {
        if (this.policies.size >= MAX_POLICIES) return this.build([d])
        q = recordsOf(d)
        this.policies.set(d.policy, q)
      }
      this.last = q
    }
    const t = secondsLeft(d)
    const reset = this.legacyHeaders ? Math.ceil(d.resetAt / 1000) : 0
    const slot = d.remaining & (SLOTS - 1)
    const held = q.records[slot]
    if (held !== undefined && q.remaining[slot] === d.remaining && q.t[slot] === t && q.reset[slot] === reset) return held
    const record = this.draft8 ? { 'RateLimit-Policy': q.item, RateLimit: `${q.head}${d.remaining};t=${t}` } : this.build([d])
    q.records[slot] = record
    q.remaining[slot] = d.remaining
    q.t[slot] = t
    q.reset[slot] = reset
    return record
  }
}
