import { DynamicModule, INestApplicationContext, Module } from '@nestjs/common';
import path from 'node:path';
import { AdminRedactor } from '../admin/admin-redactor';
import { AdminRunsService } from '../admin/admin-runs.service';
import { CommandGateway } from '../api/command-gateway.service';
import { LeaseService } from '../api/lease.service';
import { DurableSchedules } from '../api/durable-schedules.service';
import { RunRepository } from '../api/run.repository';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { DurableExecutionModule } from '../durable-execution.module';
import { ScheduleRunner } from '../maintenance/schedule-runner.service';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { RedactKey, REDACT_SURFACES } from '../options/redact';
import { AdminRunsStore } from '../store/admin-runs.store';
import { CommandStore } from '../store/command.store';
import { DurableDatabase } from '../store/durable-database';
import { RunStatsReader } from '../store/run-stats.reader';
import { WorkerPresenceStore } from '../store/worker-presence.store';

/** Shown by the CLI in place of run data when it has no `redact` hook to show it through. */
export const HIDDEN_DATA = '[hidden: pass --app to show it through your redact hook, or --show-data]';

/** Where the operator commands find the module: the app's own module (`--app`), else a database URL. */
export interface OperatorTarget {
  app?: string;
  url?: string;
  schema?: string;
  /** Without `--app`: show run data as stored (no hook to pass it through). */
  showData: boolean;
}

/** What the operator commands act through: the same services as the admin API. */
export interface Operator {
  runs: RunRepository;
  admin: AdminRunsService;
  leases: LeaseService;
  workers: WorkerPresenceStore;
  schedules: DurableSchedules;
  /** Fires a schedule now (`trigger`). */
  firer: ScheduleRunner;
}

/** Run data is hidden (every surface of the redact hook); event payloads were redacted when stored. */
function hideRunData(key: RedactKey, value: unknown): unknown {
  return (REDACT_SURFACES as readonly string[]).includes(key) ? HIDDEN_DATA : value;
}

@Module({})
class DurableCliModule {}

/** The module alone on `url`: no worker, no reconciler, no migrations; run data hidden unless `showData`. */
function cliModule(t: OperatorTarget, url: string): DynamicModule {
  return {
    module: DurableCliModule,
    imports: [
      DurableExecutionModule.forRoot({
        database: { url, schema: t.schema, migrationsRun: false, poolSize: 2 },
        worker: { enabled: false },
        reconciler: { enabled: false },
        redact: t.showData ? undefined : hideRunData,
      }),
    ],
  };
}

/** The app module exported by `file` (`FILE#Export`, AppModule by default), required from the working directory. */
export function requireAppModule(spec: string): unknown {
  const [file, exported = 'AppModule'] = spec.split('#');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const mod = require(path.resolve(file)) as Record<string, unknown>;
  const appModule = mod[exported];
  if (!appModule) throw new Error(`${file} exports no ${exported} (use --app FILE#ExportName)`);
  return appModule;
}

/**
 * Boots the module (the app's with `--app`: its database options and redact hook; else the module
 * alone on the URL), with no worker, reconciler or retention running in this process
 * (DURABLE_EXECUTION_REPLAY_ONLY), runs `fn` and closes it.
 */
export async function withOperator<T>(
  t: OperatorTarget,
  url: string | undefined,
  fn: (op: Operator) => Promise<T>,
): Promise<T> {
  let root: unknown;
  if (t.app) root = requireAppModule(t.app);
  else if (url) root = cliModule(t, url);
  else
    throw new Error(
      'DATABASE_URL is not set: export the connection string of the target database, or pass --url or --app',
    );
  return withAppContext(root, (app) => fn(operatorOf(app)));
}

/**
 * Boots `root` as an application context with the module's workers, reconciler, presence and retention
 * off (DURABLE_EXECUTION_REPLAY_ONLY, restored after), runs `fn` on it and closes it.
 */
export async function withAppContext<T>(
  root: unknown,
  fn: (app: INestApplicationContext) => Promise<T>,
): Promise<T> {
  const before = process.env.DURABLE_EXECUTION_REPLAY_ONLY;
  process.env.DURABLE_EXECUTION_REPLAY_ONLY = '1';
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { NestFactory } = require('@nestjs/core') as typeof import('@nestjs/core');
    const app = await NestFactory.createApplicationContext(root as never, { logger: ['error'] });
    try {
      return await fn(app);
    } finally {
      await app.close();
    }
  } finally {
    if (before === undefined) delete process.env.DURABLE_EXECUTION_REPLAY_ONLY;
    else process.env.DURABLE_EXECUTION_REPLAY_ONLY = before;
  }
}

function operatorOf(app: INestApplicationContext): Operator {
  const get = <T>(token: unknown) => app.get<T>(token as never, { strict: false });
  const options = get<ResolvedDurableOptions>(DURABLE_EXECUTION_OPTIONS);
  const db = get<DurableDatabase>(DurableDatabase);
  const runs = get<RunRepository>(RunRepository);
  const admin = new AdminRunsService(
    new AdminRunsStore(db),
    get(RunStatsReader),
    runs,
    get(CommandGateway),
    new AdminRedactor(options),
    get(CommandStore),
  );
  return {
    runs,
    admin,
    leases: get(LeaseService),
    workers: get(WorkerPresenceStore),
    schedules: get(DurableSchedules),
    firer: get(ScheduleRunner),
  };
}
