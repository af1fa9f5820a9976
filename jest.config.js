// TOLLGATE_LANE (scripts/test-lanes.mjs, `npm test`): `timing` runs only the suites that stop servers, hold
// requests to deadlines or load a service to capacity (TIMING_DIRS), `rest` every other suite.
const { TIMING_DIRS } = require('./scripts/unit-tests.cjs')
const lane = process.env.TOLLGATE_LANE

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test', '<rootDir>/packages'],
  testMatch: lane === 'timing' ? TIMING_DIRS.map((dir) => `<rootDir>/test/${dir}/**/*.test.ts`) : ['**/*.test.ts'],
  // The external suite's scratch projects run their own tests, against the packed packages (test/external/run.mjs).
  // TOLLGATE_SKIP_UNIT=1: the unit tier ran already (.ci/run runs it first, alone): its files are left out here.
  testPathIgnorePatterns: [
    '/node_modules/',
    '<rootDir>/test/external/projects/',
    ...(lane === 'rest' ? TIMING_DIRS.map((dir) => `<rootDir>/test/${dir}/`) : []),
    ...(process.env.TOLLGATE_SKIP_UNIT === '1'
      ? require('./scripts/unit-tests.cjs')
          .unitTestFiles(__dirname)
          .map((file) => `<rootDir>/${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`)
      : []),
  ],
  // NestJS 12 ships ES modules only: its files go through test/harness/esm-package-transform.cjs.
  transformIgnorePatterns: ['/node_modules/(?!@nestjs/)'],
  transform: {
    '/node_modules/@nestjs/.+\\.js$': '<rootDir>/test/harness/esm-package-transform.cjs',
    '^.+\\.tsx?$': [
      'ts-jest',
      {
        isolatedModules: true,
        tsconfig: { module: 'commonjs', moduleResolution: 'node', target: 'ES2022', esModuleInterop: true },
      },
    ],
  },
  moduleNameMapper: {
    '^@tollgate/(core|express|fastify|koa|nestjs|upstash|cloudflare|web|hono)$': '<rootDir>/packages/$1/src/index.ts',
    '^@tollgate/core/adapter$': '<rootDir>/packages/core/src/adapter.ts',
    '^@tollgate/core/lean$': '<rootDir>/packages/core/src/lean.ts',
    '^@tollgate/core/store$': '<rootDir>/packages/core/src/store.ts',
    '^@tollgate/express/internal$': '<rootDir>/packages/express/src/internal.ts',
    '^@tollgate/core/testing$': '<rootDir>/packages/core/src/testing.ts',
  },
  globalSetup: '<rootDir>/test/harness/global-setup.ts',
  globalTeardown: '<rootDir>/test/harness/global-teardown.ts',
  testTimeout: 30000,
}
