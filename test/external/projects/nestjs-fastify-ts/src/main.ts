// A Nest app as `nest new` sets it up (tsc, experimentalDecorators, emitDecoratorMetadata, CommonJS), on Fastify.
import 'reflect-metadata'
import type { AddressInfo } from 'node:net'
import { Controller, Get, Module } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify'
import { type Decision, RateLimitDecision, SkipRateLimit, TollgateModule } from '@tollgate/nestjs'

@Controller()
class AppController {
  @Get()
  root(@RateLimitDecision() decision: Decision | undefined) {
    return { remaining: decision?.remaining }
  }

  @Get('health')
  @SkipRateLimit()
  health() {
    return { ok: true }
  }
}

@Module({ imports: [TollgateModule.forRoot({ max: 2, window: '1m' })], controllers: [AppController] })
class AppModule {}

async function main() {
  const app = await NestFactory.create<NestFastifyApplication>(AppModule, new FastifyAdapter(), { logger: false })
  await app.listen(0, '127.0.0.1')
  console.log(`listening ${(app.getHttpServer().address() as AddressInfo).port}`)
}
void main()
