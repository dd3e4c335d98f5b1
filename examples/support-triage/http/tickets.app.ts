/**
 * The support desk as a Nest HTTP app: `POST /tickets` starts the agent's run, `GET /tickets/:id` shows
 * it. One process serves the API and runs a worker (`DurableExecutionModule`); the demo starts two of
 * them, one after the other, on one database: the second takes over what the first one left.
 */
import { INestApplication, Module, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DurableExecutionModule, DurableExceptionFilter } from '../../../src'; // in an app: 'nestjs-durable-execution'
import { TRIAGE_SETTINGS, TriageTools, type TriageSettings } from '../triage.tools';
import { SupportTriageWorkflow } from '../triage.workflow';
import { TicketsController } from './tickets.controller';

export interface TicketsAppOptions {
  databaseUrl: string;
  settings: TriageSettings;
  /** The worker's id in the run's record (default: host, pid and a random suffix). */
  workerId?: string;
  /** How long a claim lasts without a heartbeat: a SIGKILLed worker's run is taken over after it. */
  leaseTtlMs?: number;
}

export async function createTicketsApp(opts: TicketsAppOptions): Promise<INestApplication> {
  const leaseTtlMs = opts.leaseTtlMs ?? 2000;
  @Module({
    imports: [
      DurableExecutionModule.forRoot({
        database: { url: opts.databaseUrl, poolSize: 4 },
        worker: {
          concurrency: 8,
          pollIntervalMs: 100,
          leaseTtlMs,
          heartbeatMs: Math.round(leaseTtlMs / 4),
          ...(opts.workerId ? { workerId: opts.workerId } : {}),
        },
        reconciler: { intervalMs: 250, backoffBaseMs: 10, backoffMaxMs: 100 },
      }),
    ],
    controllers: [TicketsController],
    providers: [{ provide: TRIAGE_SETTINGS, useValue: opts.settings }, TriageTools, SupportTriageWorkflow],
  })
  class TicketsAppModule {}

  const app = await NestFactory.create(TicketsAppModule, { logger: ['error', 'warn'] });
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true }));
  app.useGlobalFilters(new DurableExceptionFilter());
  await app.init();
  return app;
}
