import { DynamicModule, Injectable, Module, OnModuleInit } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { FenceSecret, FenceVerifier } from '../../src/fence'; // in an app: 'nestjs-durable-execution/fence'
import { TransfersController } from './transfers.controller';

/** Creates the service's tables at boot: its ledger and the verifier's table of fences. */
@Injectable()
class Tables implements OnModuleInit {
  constructor(
    private readonly dataSource: DataSource,
    private readonly verifier: FenceVerifier,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.dataSource.query(this.verifier.createTableSql());
    await this.dataSource.query(
      `create table if not exists transfers (
         id bigserial primary key,
         idempotency_key text not null,
         account text not null,
         amount_cents bigint not null,
         run_id text not null,
         timeline integer not null,
         epoch bigint not null,
         created_at timestamptz not null default now())`,
    );
    await this.dataSource.query(`create index if not exists transfers_key on transfers (idempotency_key)`);
  }
}

/** Options of the fenced transfer service. */
export interface FencedTargetOptions {
  /** Its own PostgreSQL database. */
  databaseUrl: string;
  /**
   * The keys tokens must be signed with, by key id: the workers' module option `fence: { keyId, secret }`
   * (two ids during a rotation). Without: tokens are not authenticated (a warning at boot).
   */
  keys?: Record<string, FenceSecret>;
}

/**
 * The fenced transfer service on its own PostgreSQL database. Its `FenceVerifier` is a provider, so
 * `DurableFenceGuard` authenticates each token with it before a handler runs.
 */
@Module({})
export class FencedTargetModule {
  static forRoot(options: FencedTargetOptions): DynamicModule {
    return {
      module: FencedTargetModule,
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: options.databaseUrl })],
      controllers: [TransfersController],
      providers: [{ provide: FenceVerifier, useValue: new FenceVerifier({ keys: options.keys }) }, Tables],
    };
  }
}
