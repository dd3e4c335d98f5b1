import { INestApplication, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DurableExecutionModule, DurableExecutionModuleOptions } from '../../src';

/**
 * Boots a Nest app with the module for a test. The worker and reconciler timers are off by default
 * (tests drive `worker.tick()` and `reconciler.sweep()` directly); pass `worker: { enabled: true }`
 * for the real schedule.
 */
export async function bootApp(
  url: string,
  providers: Type<unknown>[] = [],
  options: Partial<DurableExecutionModuleOptions> = {},
  controllers: Type<unknown>[] = [],
): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      DurableExecutionModule.forRoot({
        ...options,
        database: { url, ...options.database },
        worker: { enabled: false, ...options.worker },
        reconciler: { enabled: false, ...options.reconciler },
      }),
    ],
    providers,
    controllers,
  }).compile();
  const app = moduleRef.createNestApplication({ logger: ['error'] });
  await app.init();
  return app;
}
