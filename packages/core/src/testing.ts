/*
 * "@tollgate/core/testing": the store contract suite, for authors of a `Store`. It runs inside the
 * author's own test files and asserts with node:assert, so @tollgate/core depends on no test runner.
 */
export { countOf, limitSpec, resetCount, storeCall } from './testing/store-calls'
export {
  type ContractRedis,
  type ContractRunner,
  type ContractStore,
  type StoreContractOptions,
  storeContract,
} from './testing/store-contract'
