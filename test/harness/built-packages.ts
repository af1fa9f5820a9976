import { join } from 'node:path'

/**
 * Where the built packages are, for the tests that load them as users get them (`npm test` builds them
 * first). These tests live outside `npm run test:unit`, which runs on the sources without a build:
 * importing this module is what marks a test file as needing the build (scripts/unit-tests.cjs).
 */
export const REPO_ROOT = join(__dirname, '..', '..')

/** The `dist` folder of a package, e.g. `distDir('@tollgate/core')`. */
export function distDir(name: string): string {
  return join(REPO_ROOT, 'packages', name.replace('@tollgate/', ''), 'dist')
}
