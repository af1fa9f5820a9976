// `npm run test:unit`: the tests that need neither Redis nor a build (see scripts/unit-tests.cjs for the
// rule), with no globalSetup, so no redis-server is started. `npm test` runs everything with jest.config.js.
const base = require('./jest.config.js')
const { unitTestFiles } = require('./scripts/unit-tests.cjs')

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  roots: ['<rootDir>/test'],
  testMatch: unitTestFiles(__dirname).map((file) => `<rootDir>/${file}`),
  globalSetup: undefined,
  globalTeardown: undefined,
}
