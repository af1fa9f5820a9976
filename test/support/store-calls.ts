// The store-call helpers ship with the contract suite (@tollgate/core/testing); tests take them from there.
export { countOf, limitSpec, resetCount, storeCall } from '@tollgate/core/testing'
