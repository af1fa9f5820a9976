/*
 * "@tollgate/express/internal": what Express knowledge other Tollgate packages share, today
 * @tollgate/nestjs on platform-express. Not an API for apps: it follows this package's version, not
 * semver of its own. It imports nothing from Express at run time, so a package may load it on any
 * platform.
 */
export { expressIp } from './client-ip'
export { expressRecord } from './decisions'
export { expressVisit } from './visits'
