import type { AlgorithmScripts } from './algorithm'

/*
 * Refunds and settles of one turn, several in one script run. A concurrency slot's release is a refund,
 * one per admitted request: sent one script call each, releases cost Redis more than the admits they
 * undo, which are batched (batch-script.ts). Each call keeps its own script (the algorithm's refund or
 * settle, exactly once on its own terms, protocol.ts): the batch runs it as a function of the call's own
 * KEYS and ARGV, so the body reads as the single-call script it is.
 *
 *   KEYS  = the calls' keys, in turn
 *   ARGV  = the number of calls, then per call: its number of keys, its number of arguments, the arguments
 *   Reply = per call, what its script returns (its call id), or {'err', message}: a key of another type
 *           (WRONGTYPE) fails that call alone, as its own script call would have; any other error (NOPERM,
 *           OOM) is the batch's, so the store reads it as it reads a refused script. The calls before it
 *           in the batch have run; each is once per call id, so sending them again changes nothing.
 */

/** The batch form of a refund or settle script (`body`: the single-call script, KEYS and ARGV its own). */
export function correctionBatchScript(body: string): string {
  return `local ALL_KEYS, ALL_ARGV = KEYS, ARGV
local function one(KEYS, ARGV)
${body}
end
local out, k, a, keys, args, lk, la = {}, 0, 1, {}, {}, 0, 0
for c = 1, tonumber(ALL_ARGV[1]) do
  local nk, na = tonumber(ALL_ARGV[a + 1]), tonumber(ALL_ARGV[a + 2])
  for j = 1, nk do keys[j] = ALL_KEYS[k + j] end
  for j = nk + 1, lk do keys[j] = nil end
  for j = 1, na do args[j] = ALL_ARGV[a + 2 + j] end
  for j = na + 1, la do args[j] = nil end
  k, a, lk, la = k + nk, a + 2 + na, nk, na
  local ok, reply = pcall(one, keys, args)
  if ok then
    out[c] = reply
  elseif type(reply) == 'table' and reply.err and string.find(reply.err, 'WRONGTYPE', 1, true) then
    out[c] = {'err', reply.err}
  else
    error(reply)
  end
end
return out`
}

/** The script of an algorithm's refund batch: its own, or its refund script in the batch form. */
export function refundBatchScript(scripts: Pick<AlgorithmScripts, 'refund' | 'refundBatch'>): string {
  return scripts.refundBatch ?? correctionBatchScript(scripts.refund)
}

/** ARGV of a correction batch: the calls' argument lists, each after its number of keys and of arguments. */
export function correctionBatchArgs(
  calls: ReadonlyArray<{ keys: readonly string[]; args: ReadonlyArray<string | number> }>,
): Array<string | number> {
  const out: Array<string | number> = [calls.length]
  for (const { keys, args } of calls) out.push(keys.length, args.length, ...args)
  return out
}
