import { Type } from 'class-transformer';
import {
  IsIn,
  IsBoolean,
  IsInt,
  IsNumber,
  IsObject,
  IsOptional,
  IsString,
  Max,
  Min,
  MinLength,
  ValidateNested,
} from 'class-validator';

import { IsFunctionValue } from './is-function.validator';
import { IsSchemaName } from './schema-name.validator';

// Validation shapes of the module options. Only class-validator sees these; services receive
// ResolvedDurableOptions with every default merged.

export class RetryPolicySchema {
  @IsOptional() @IsInt() @Min(1) @Max(100) maxAttempts?: number;
  @IsOptional() @IsInt() @Min(0) initialDelayMs?: number;
  @IsOptional() @IsNumber() @Min(1) multiplier?: number;
  @IsOptional() @IsInt() @Min(0) maxDelayMs?: number;
  @IsOptional() @IsNumber() @Min(0) @Max(1) jitter?: number;
}

export class DatabaseOptionsSchema {
  @IsOptional() @IsString() @MinLength(1) url?: string;
  @IsOptional() @IsString() @MinLength(1) dataSourceName?: string;
  @IsOptional() @IsObject() dataSource?: object;
  @IsOptional() @IsInt() @Min(1) @Max(1000) poolSize?: number;
  @IsOptional() @IsBoolean() migrationsRun?: boolean;
  @IsOptional() @IsSchemaName() schema?: string;
  @IsOptional() @IsString() @MinLength(1) directUrl?: string;
  @IsOptional() @IsBoolean() preparedStatements?: boolean;
}

export class WorkerOptionsSchema {
  @IsOptional() @IsBoolean() enabled?: boolean;
  @IsOptional() @IsInt() @Min(1) @Max(10_000) concurrency?: number;
  @IsOptional() @IsInt() @Min(10) pollIntervalMs?: number;
  @IsOptional() @IsInt() @Min(100) leaseTtlMs?: number;
  @IsOptional() @IsInt() @Min(10) heartbeatMs?: number;
  @IsOptional() @IsBoolean() fencedTransport?: boolean;
  @IsOptional() @IsInt() @Min(0) wireMarginMs?: number;
  @IsOptional() @IsInt() @Min(0) drainTimeoutMs?: number;
  @IsOptional() @IsInt() @Min(0) handoffLeaseMs?: number;
  @IsOptional() @IsInt() @Min(0) @Max(1000) groupCommit?: number;
  @IsOptional() @IsString() @MinLength(1) workerId?: string;
  @IsOptional() @IsInt() @Min(100) presenceIntervalMs?: number;
  @IsOptional() @IsInt() @Min(0) lateCallGraceMs?: number;
}

export class ReconcilerOptionsSchema {
  @IsOptional() @IsBoolean() enabled?: boolean;
  @IsOptional() @IsInt() @Min(10) intervalMs?: number;
  @IsOptional() @IsString() cron?: string;
  @IsOptional() @IsInt() @Min(1) @Max(10_000) batchSize?: number;
  @IsOptional() @IsInt() @Min(0) backoffBaseMs?: number;
  @IsOptional() @IsInt() @Min(0) backoffMaxMs?: number;
}

export class LimitOptionsSchema {
  @IsOptional() @IsInt() @Min(1) maxInputBytes?: number;
  @IsOptional() @IsInt() @Min(1) maxOutputBytes?: number;
  @IsOptional() @IsInt() @Min(1) maxShownValueBytes?: number;
  @IsOptional() @IsInt() @Min(1) maxStreamClients?: number;
  @IsOptional() @IsInt() @Min(1) @Max(1_000_000_000) maxPendingSignals?: number;
  @IsOptional() @IsInt() @Min(1) @Max(1_000_000_000) maxPendingSignalsPerName?: number;
  @IsOptional() @IsInt() @Min(0) minScheduleIntervalMs?: number;
}

export class DurableExecutionOptionsSchema {
  @IsObject({ message: 'database is required: give { url } or { dataSourceName } or { dataSource }' })
  @ValidateNested()
  @Type(() => DatabaseOptionsSchema)
  database!: DatabaseOptionsSchema;

  @IsOptional() @ValidateNested() @Type(() => WorkerOptionsSchema) worker?: WorkerOptionsSchema;
  @IsOptional() @ValidateNested() @Type(() => ReconcilerOptionsSchema) reconciler?: ReconcilerOptionsSchema;
  @IsOptional() @ValidateNested() @Type(() => LimitOptionsSchema) limits?: LimitOptionsSchema;
  @IsOptional() @IsInt() @Min(1) @Max(1000) defaultMaxAttempts?: number;
  @IsOptional() @ValidateNested() @Type(() => RetryPolicySchema) defaultRetry?: RetryPolicySchema;
  @IsOptional() @IsInt() @Min(0) defaultTimeoutMs?: number;
  @IsOptional() @IsFunctionValue() redact?: unknown;
  @IsOptional() @IsBoolean() logRunData?: boolean;
  @IsOptional() @IsIn(['warn', 'refuse']) unservedKinds?: 'warn' | 'refuse';
  @IsOptional() @IsIn(['warn', 'refuse']) unkeyedStarts?: 'warn' | 'refuse';
}
