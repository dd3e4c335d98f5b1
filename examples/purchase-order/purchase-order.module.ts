/**
 * The purchase-order feature as a Nest module: the workflow, its steps and its vendors. The same module
 * is imported by the worker processes, by the demo's orchestrator (which only starts runs) and by the
 * HTTP app. `DurableExecutionModule.forRoot(...)` is imported once next to it, by the app.
 */
import { DynamicModule, Module } from '@nestjs/common';
import OpenAI from 'openai';
import type { DurableExecutionModuleOptions } from '../../src';
import { workerTimings, type ServiceSettings } from './config';
import { PurchaseOrderAgent } from './purchase-order.agent';
import { PurchaseOrderWorkflow } from './purchase-order.workflow';
import { Carrier, CreditBureau, Notifier, PaymentGateway, SERVICE_SETTINGS, VendorApi } from './vendors';

const FEATURE = [PurchaseOrderAgent, CreditBureau, PaymentGateway, Carrier, Notifier, PurchaseOrderWorkflow];

@Module({})
export class PurchaseOrderModule {
  static register(settings: ServiceSettings): DynamicModule {
    return {
      module: PurchaseOrderModule,
      providers: [
        { provide: SERVICE_SETTINGS, useValue: settings },
        // The official client, pointed at an OpenAI-compatible endpoint (a loopback one in the demo).
        {
          provide: OpenAI,
          useFactory: () =>
            new OpenAI({
              apiKey: process.env.DEMO_MODEL_API_KEY ?? 'sk-loopback',
              baseURL: `${settings.modelUrl}/v1`,
            }),
        },
        VendorApi,
        ...FEATURE,
      ],
      exports: [SERVICE_SETTINGS, OpenAI, VendorApi, ...FEATURE],
    };
  }
}

/**
 * Module options for a process of the demo, at its time scale: the chapter's 30 s lease with a 10 s
 * heartbeat, 30 s drain, 5 s reconciler sweep, each scaled (with floors for a loaded 2-core machine).
 */
export function durableOptions(opts: {
  databaseUrl: string;
  timeScaleMs: number;
  worker: boolean;
  concurrency?: number;
  workerId?: string;
  poolSize?: number;
}): DurableExecutionModuleOptions {
  const t = workerTimings(opts.timeScaleMs);
  return {
    database: { url: opts.databaseUrl, poolSize: opts.poolSize ?? 10 },
    worker: {
      enabled: opts.worker,
      concurrency: opts.concurrency ?? 100,
      pollIntervalMs: 200,
      leaseTtlMs: t.leaseTtlMs,
      heartbeatMs: t.heartbeatMs,
      // The pod's grace period minus a margin for releasing the leases and closing the pool.
      drainTimeoutMs: t.drainMs,
      ...(opts.workerId ? { workerId: opts.workerId } : {}),
    },
    reconciler: {
      enabled: opts.worker,
      intervalMs: t.reconcilerIntervalMs,
      backoffBaseMs: t.backoffBaseMs,
      backoffMaxMs: t.backoffBaseMs * 8,
    },
  };
}
