import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { SchedulerRegistry } from '@nestjs/schedule';
import { DurableExceptionFilter } from 'nestjs-durable-execution';
import { AppModule } from './app.module';
import { TicksService } from './ticks.service';

/**
 * ROLE=api: HTTP on PORT (HTTP=fastify: on Fastify, else Express), starts runs. ROLE=worker: drives them.
 * Prints one READY line, or BOOT_FAILED.
 */
async function bootstrap(): Promise<void> {
  if (process.env.ROLE === 'worker') {
    const worker = await NestFactory.createApplicationContext(AppModule.forRole('worker'), {
      abortOnError: false,
    });
    worker.enableShutdownHooks();
    const ticks = await worker.get(TicksService).over(1000);
    // The module's jobs, as the app's SchedulerRegistry lists them (with the app's own).
    const registry = worker.get(SchedulerRegistry);
    const jobs = [...registry.getIntervals(), ...registry.getCronJobs().keys()].filter((n) =>
      n.startsWith('durable-execution:'),
    );
    console.log(`READY worker ticks=${ticks} jobs=${jobs.sort().join(',')}`);
    return;
  }
  const fastify = process.env.HTTP === 'fastify';
  const api = fastify
    ? await NestFactory.create(AppModule.forRole('api'), new FastifyAdapter(), { abortOnError: false })
    : await NestFactory.create(AppModule.forRole('api'), { abortOnError: false });
  console.log(`HTTP ${fastify ? 'fastify' : 'express'}`);
  api.enableShutdownHooks();
  api.useGlobalFilters(new DurableExceptionFilter());
  await api.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
  const address = api.getHttpServer().address() as { port: number };
  console.log(`READY api port=${address.port}`);
}

bootstrap().catch((err: { code?: string; message?: string }) => {
  console.log(`BOOT_FAILED code=${err?.code ?? 'none'} ${err?.message ?? String(err)}`);
  process.exit(1);
});
