import { dirname } from 'node:path'

/**
 * Lets a test call `app.inject()`. light-my-request (fastify's inject) requires `cookie`, whose 2.x
 * is ESM only, which jest's CommonJS runtime cannot load; inject uses it only for Set-Cookie
 * requests, which these tests never make. Call before the first inject() (fastify loads it lazily).
 */
export function allowInject(): void {
  const cookie = require.resolve('cookie', { paths: [dirname(require.resolve('light-my-request'))] })
  jest.doMock(cookie, () => ({
    stringifySetCookie: () => {
      throw new Error('cookies are not supported by these tests')
    },
  }))
}
