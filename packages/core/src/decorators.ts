import { TollgateError } from './errors'

/*
 * One method decorator for both of TypeScript's decorator modes. Standard (TC39, TypeScript 5
 * without experimentalDecorators) calls it as (method, context) and takes the returned function;
 * legacy (experimentalDecorators: NestJS, routing-controllers, SWC, esbuild) calls it as
 * (target, key, descriptor) and takes the returned descriptor. A legacy decorator that returns a
 * function instead makes TypeScript's __decorate define the property from that function as if it
 * were a descriptor: the method becomes undefined (never limited), and a route decorator applied
 * after it reads descriptor.value and dies in reflect-metadata.
 */

/** The call signatures of a method decorator that type-checks, and runs, under both modes. */
export interface MethodDecorator {
  /** Standard (TC39) decorators: TypeScript 5 without `experimentalDecorators`. */
  <This, Args extends unknown[], Result>(
    method: (this: This, ...args: Args) => Result,
    context: ClassMethodDecoratorContext<This, (this: This, ...args: Args) => Result>,
  ): (this: This, ...args: Args) => Result
  /** Legacy decorators: `experimentalDecorators` (NestJS, routing-controllers). */
  <T extends (...args: never[]) => unknown>(
    target: object,
    key: string | symbol,
    descriptor: TypedPropertyDescriptor<T>,
  ): TypedPropertyDescriptor<T>
}

type Method = (this: unknown, ...args: unknown[]) => unknown

/**
 * Builds a method decorator from `wrap`, which returns the limited method. `label(self)` names the
 * method for error messages ("AuthController.login()"), from the instance it is called on.
 */
export function methodDecorator(wrap: (method: Method, label: (self: unknown) => string) => Method): MethodDecorator {
  function decorate(...args: unknown[]): unknown {
    const [value, second, descriptor] = args
    if (args.length === 2 && isStandardContext(second)) {
      if (second.kind !== 'method' || typeof value !== 'function') throw notAMethod(`a class ${second.kind} (${String(second.name)})`)
      const name = String(second.name)
      return limitedCopy(
        value as Method,
        wrap(value as Method, (self) => methodLabel(classOf(self), name)),
      )
    }
    if (args.length >= 3 && isDescriptor(descriptor) && (typeof second === 'string' || typeof second === 'symbol')) {
      const method = descriptor.value
      const owner = typeof value === 'function' ? (value as Function).name : classOf(value)
      if (typeof method !== 'function')
        throw notAMethod(`${methodLabel(owner, String(second))}, which is not a method (a getter, setter or field)`)
      // Read from the prototype (or the constructor, for a static method) at decoration time: the class name is known here.
      descriptor.value = limitedCopy(
        method as Method,
        wrap(method as Method, () => methodLabel(owner, String(second))),
      )
      return descriptor
    }
    throw notAMethod(`something else: it was called with ${args.length} argument(s)`)
  }
  return decorate as MethodDecorator
}

/**
 * The TollgateError for a call in which a decorator cannot find the request it limits: the method
 * fails instead of running unlimited. `expected` names what it looked for, `hint` how to give it.
 */
export function missingRequest(label: string, args: readonly unknown[], expected: string, hint: string): TollgateError {
  const kinds = args.map((a) => (a === null ? 'null' : Array.isArray(a) ? 'array' : typeof a)).join(', ')
  return new TollgateError(
    `@RateLimit on ${label} found no ${expected} among its ${args.length} argument(s) (${kinds || 'none'}), so it cannot limit the call; ${hint}`,
    'TG_DECORATOR_NO_REQUEST',
  )
}

/** True for an object: the shape checks of the adapters start here. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null
}

function notAMethod(what: string): TollgateError {
  return new TollgateError(`@RateLimit decorates class methods, but was applied to ${what}`, 'TG_DECORATOR_TARGET')
}

function isStandardContext(value: unknown): value is { kind: string; name: string | symbol } {
  return isObject(value) && typeof value.kind === 'string' && 'name' in value
}

function isDescriptor(value: unknown): value is PropertyDescriptor {
  return isObject(value) && ('value' in value || 'get' in value || 'set' in value || 'initializer' in value)
}

function classOf(self: unknown): string {
  if (typeof self === 'function') return self.name || 'anonymous class'
  const ctor = isObject(self) ? self.constructor : undefined
  return typeof ctor === 'function' && ctor.name ? ctor.name : 'anonymous class'
}

function methodLabel(owner: string, name: string): string {
  return `${owner}.${name}()`
}

type MetadataReflect = {
  getOwnMetadataKeys(target: object): unknown[]
  getOwnMetadata(key: unknown, target: object): unknown
  defineMetadata(key: unknown, value: unknown, target: object): void
}

/**
 * Gives `limited` the name and the reflect-metadata of `method`. Route decorators applied before this
 * one (below it in the source) keep their data on the method function itself (NestJS's @Get writes
 * its path there): a wrapper without it is a route nobody registers. reflect-metadata is used when the
 * app loaded it, never imported.
 */
function limitedCopy(method: Method, limited: Method): Method {
  Object.defineProperty(limited, 'name', { value: method.name, configurable: true })
  const meta = Reflect as unknown as Partial<MetadataReflect>
  if (
    typeof meta.getOwnMetadataKeys === 'function' &&
    typeof meta.getOwnMetadata === 'function' &&
    typeof meta.defineMetadata === 'function'
  ) {
    for (const key of meta.getOwnMetadataKeys(method)) meta.defineMetadata(key, meta.getOwnMetadata(key, method), limited)
  }
  return limited
}
