import { IsDefined, IsIn, IsNotEmpty, IsOptional, IsString, MaxLength, ValidateIf } from 'class-validator';
import { ApiProperty, ApiPropertyOptional } from '../openapi';

/** Body of `POST .../cancel`. */
export class CancelRunDto {
  @ApiPropertyOptional({ maxLength: 500 })
  @IsOptional()
  @IsString()
  @MaxLength(500)
  reason?: string;
}

/** Body of `POST .../retry` (nothing to say but who, which comes from the guard). */
export class RetryRunDto {}

/** Body of `POST .../approve` and `POST .../reject`. */
export class CommandDecisionDto {
  @ApiProperty({ description: "The command's idempotency key (from the run's commands)" })
  @IsString()
  @IsNotEmpty()
  @MaxLength(1000)
  key!: string;

  @ApiPropertyOptional({ maxLength: 1000 })
  @IsOptional()
  @IsString()
  @MaxLength(1000)
  note?: string;
}

/** Body of `POST .../resolve`: settle an in-doubt command. */
export class ResolveCommandDto {
  @ApiProperty()
  @IsString()
  @IsNotEmpty()
  @MaxLength(1000)
  key!: string;

  @ApiProperty({ enum: ['succeeded', 'failed', 'retry'] })
  @IsIn(['succeeded', 'failed', 'retry'], { message: 'outcome must be succeeded, failed or retry' })
  outcome!: 'succeeded' | 'failed' | 'retry';

  @ApiPropertyOptional({ description: 'With `succeeded`: the result the target reports (JSON)' })
  @ValidateIf((o: ResolveCommandDto) => o.outcome === 'succeeded' && o.result === undefined)
  @IsDefined({ message: 'result is required when outcome is succeeded (null is allowed)' })
  result?: unknown;

  @ApiPropertyOptional({ description: 'With `failed`: why' })
  @ValidateIf((o: ResolveCommandDto) => o.outcome === 'failed')
  @IsString()
  @IsNotEmpty({ message: 'error must say why the command failed' })
  @MaxLength(2000)
  error?: string;
}

/** Body of `POST .../signal`. */
export class SendSignalDto {
  @ApiProperty({ maxLength: 200 })
  @IsString()
  @IsNotEmpty()
  @MaxLength(200)
  name!: string;

  @ApiPropertyOptional({ description: 'Any JSON value' })
  @IsOptional()
  payload?: unknown;
}
