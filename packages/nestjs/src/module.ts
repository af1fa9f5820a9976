import {
  type DynamicModule,
  Inject,
  Injectable,
  Module,
  type ModuleMetadata,
  type OnModuleDestroy,
  type OnModuleInit,
  type Provider,
} from '@nestjs/common'
import { APP_GUARD, DiscoveryModule, DiscoveryService } from '@nestjs/core'
import { RATE_LIMIT, type RateLimitMetadata } from './decorators'
import { TOLLGATE_LIMITS, TollgateGuard } from './guard'
import { TollgateLimits, type TollgateModuleOptions } from './limits'

/** `TollgateModule.forRootAsync`: the options from a factory with injected dependencies (a config service, a Redis client). */
export interface TollgateModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  // biome-ignore lint/suspicious/noExplicitAny: the factory's arguments are whatever `inject` lists
  useFactory: (...args: any[]) => TollgateModuleOptions | Promise<TollgateModuleOptions>
  inject?: NonNullable<Extract<Provider, { useFactory: unknown }>['inject']>
  /**
   * Registers TollgateGuard as a global guard. Decided when the module is declared, so it is here
   * rather than in what the factory returns (where it is ignored).
   * @default true
   */
  globalGuard?: boolean
}

/**
 * Builds every `@RateLimit` limit of the app's controllers and providers when the app initializes,
 * so invalid options fail `app.init()`/`app.listen()` rather than a request, and warns about a
 * decorated controller the guard does not run on. Closes them at `app.close()`.
 */
class TollgateExplorer implements OnModuleInit, OnModuleDestroy {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly limits: TollgateLimits,
  ) {}

  onModuleInit(): void {
    const warn = this.limits.module.limiter.config.logger
    for (const [wrappers, controllers] of [
      [this.discovery.getControllers(), true],
      [this.discovery.getProviders(), false],
    ] as const) {
      for (const { metatype } of wrappers) {
        if (typeof metatype !== 'function') continue
        const decorated = [metatype, ...methodsOf(metatype.prototype)].filter((target) => {
          const metadata = Reflect.getOwnMetadata(RATE_LIMIT, target) as RateLimitMetadata | undefined
          if (metadata !== undefined) this.limits.of(metadata)
          return metadata !== undefined
        })
        if (controllers && !this.limits.globalGuard && decorated.length > 0 && !guarded(metatype)) {
          warn.warn(
            `Tollgate: ${metatype.name} has @RateLimit, but TollgateGuard does not run on it (the module's globalGuard is false): add @UseGuards(TollgateGuard) to the controller, or its limits never apply`,
          )
        }
      }
    }
  }

  /** `app.close()`: the limiters give back what a `lease` holds, rather than let it lapse at the window's end. */
  onModuleDestroy(): Promise<void> {
    return this.limits.close()
  }
}

/** The methods of a class's prototype chain (its own first). */
function methodsOf(prototype: object | null | undefined): Function[] {
  const methods: Function[] = []
  for (let p = prototype; p != null && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Object.getOwnPropertyNames(p)) {
      const value = name === 'constructor' ? undefined : Object.getOwnPropertyDescriptor(p, name)?.value
      if (typeof value === 'function') methods.push(value)
    }
  }
  return methods
}

/** Where `@UseGuards` keeps its guards (GUARDS_METADATA, not exported by @nestjs/common's index). */
const GUARDS_METADATA = '__guards__'

/** True when a controller class, or any of its methods, lists TollgateGuard (or a subclass) in `@UseGuards`. */
function guarded(controller: Function): boolean {
  const isTollgate = (g: unknown) =>
    (typeof g === 'function' && (g === TollgateGuard || g.prototype instanceof TollgateGuard)) || g instanceof TollgateGuard
  return [controller, ...methodsOf(controller.prototype)].some((target) =>
    ((Reflect.getMetadata(GUARDS_METADATA, target) as unknown[] | undefined) ?? []).some(isTollgate),
  )
}

/**
 * Rate limiting for a Nest app: `TollgateModule.forRoot({ max: 10 })` limits every route (the module
 * is global), and `@RateLimit`/`@SkipRateLimit` on controllers add or remove limits.
 */
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class with static forRoot methods
export class TollgateModule {
  /** The module with options known now: they are validated here, as `rateLimit(options)` validates them in the other adapters. */
  static forRoot(options?: TollgateModuleOptions): DynamicModule {
    const limits = new TollgateLimits(options)
    return TollgateModule.declare({ provide: TOLLGATE_LIMITS, useValue: limits }, limits.globalGuard, [])
  }

  /** The module with options from a factory (validated when the app is created). */
  static forRootAsync(options: TollgateModuleAsyncOptions): DynamicModule {
    const provider: Provider = {
      provide: TOLLGATE_LIMITS,
      useFactory: async (...args: unknown[]) => {
        const { globalGuard: _ignored, ...made } = (await options.useFactory(...args)) ?? {}
        return new TollgateLimits({ ...made, globalGuard: options.globalGuard })
      },
      inject: options.inject ?? [],
    }
    return TollgateModule.declare(provider, options.globalGuard !== false, options.imports ?? [])
  }

  private static declare(limits: Provider, globalGuard: boolean, imports: NonNullable<ModuleMetadata['imports']>): DynamicModule {
    return {
      module: TollgateModule,
      global: true,
      imports: [...imports, DiscoveryModule],
      providers: [limits, TollgateExplorer, ...(globalGuard ? [{ provide: APP_GUARD, useClass: TollgateGuard }] : [])],
      exports: [TOLLGATE_LIMITS],
    }
  }
}

// Nest's decorators, applied as functions: this package is compiled without experimentalDecorators.
Module({})(TollgateModule)
Injectable()(TollgateExplorer)
Inject(DiscoveryService)(TollgateExplorer, undefined, 0)
Inject(TOLLGATE_LIMITS)(TollgateExplorer, undefined, 1)
