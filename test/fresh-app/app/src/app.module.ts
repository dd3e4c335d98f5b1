import { DynamicModule, Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DurableExecutionModule } from 'nestjs-durable-execution';
import { DURABLE_EXECUTION_MIGRATIONS } from 'nestjs-durable-execution/migrations';
import { GreetingLog, GreetingWorkflow } from './greeting.workflow';
import { RunsController } from './runs.controller';
import { TicksService } from './ticks.service';

export type Role = 'api' | 'worker';

/**
 * One compiled app, two processes. MIGRATIONS=module: the module applies its migrations (its default).
 * MIGRATIONS=app: the app's DataSource lists DURABLE_EXECUTION_MIGRATIONS and runs them (`migrationsRun`),
 * and the module is told not to (`database.migrationsRun: false`), unless MODULE_MIGRATIONS_RUN=true
 * (the misconfiguration the check expects to fail fast).
 */
@Module({})
export class AppModule {
  static forRole(role: Role): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot({ isGlobal: true }),
        ScheduleModule.forRoot(),
        TypeOrmModule.forRootAsync({
          inject: [ConfigService],
          useFactory: (config: ConfigService) => {
            const appMigrates = config.getOrThrow<string>('MIGRATIONS') === 'app';
            return {
              type: 'postgres' as const,
              url: config.getOrThrow<string>('DATABASE_URL'),
              autoLoadEntities: true,
              migrations: appMigrates ? [...DURABLE_EXECUTION_MIGRATIONS] : [],
              migrationsRun: appMigrates,
            };
          },
        }),
        DurableExecutionModule.forRootAsync({
          inject: [ConfigService],
          useFactory: (config: ConfigService) => {
            const appMigrates = config.getOrThrow<string>('MIGRATIONS') === 'app';
            const forced = config.get<string>('MODULE_MIGRATIONS_RUN');
            return {
              database: {
                dataSourceName: 'default',
                migrationsRun: forced === undefined ? !appMigrates : forced === 'true',
              },
              worker: { enabled: role === 'worker', pollIntervalMs: 200 },
              reconciler: { enabled: role === 'worker' },
            };
          },
        }),
      ],
      controllers: role === 'api' ? [RunsController] : [],
      providers: role === 'worker' ? [TicksService, GreetingLog, GreetingWorkflow] : [TicksService],
    };
  }
}
