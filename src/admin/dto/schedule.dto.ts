import { IsBoolean, IsIn, IsNotEmpty, IsObject, IsOptional, IsString, MaxLength } from 'class-validator';
import { ApiProperty, ApiPropertyOptional } from '../../nest/openapi';
import { StorableText } from './run-actions.dto';
import { RawJson } from '../admin-validation.pipe';

/** Body of `POST <path>/api/schedules`: a schedule made at run time (`DurableSchedules.create`). */
export class CreateScheduleDto {
  @ApiProperty({
    maxLength: 200,
    description: 'Unique name (not one a @DurableCron holds; an existing one is a 409 unless replace: true)',
  })
  @IsString()
  @StorableText()
  @IsNotEmpty()
  @MaxLength(200)
  name!: string;

  @ApiProperty({ maxLength: 200, description: 'The workflow kind each tick starts' })
  @IsString()
  @StorableText()
  @IsNotEmpty()
  @MaxLength(200)
  kind!: string;

  @ApiProperty({ description: "Cron expression, as @nestjs/schedule's: '0 2 * * *', '*/10 * * * * *'" })
  @IsString()
  @IsNotEmpty()
  @MaxLength(200)
  cron!: string;

  @ApiPropertyOptional({ description: "IANA time zone; default 'UTC'" })
  @IsOptional()
  @IsString()
  @MaxLength(100)
  timezone?: string;

  @ApiPropertyOptional({
    description:
      'A JSON object every run gets, beside schedule and scheduledAt (at most limits.maxInputBytes: 413 beyond)',
  })
  @IsOptional()
  @IsObject()
  @RawJson()
  input?: Record<string, unknown>;

  @ApiPropertyOptional({ enum: ['latest', 'all', 'skip'] })
  @IsOptional()
  @IsIn(['latest', 'all', 'skip'])
  catchUp?: 'latest' | 'all' | 'skip';

  @ApiPropertyOptional({
    maxLength: 200,
    description:
      "Key of every run it starts, for the kind's per-key limits; default: the workflow's concurrencyKey(input)",
  })
  @IsOptional()
  @IsString()
  @StorableText()
  @IsNotEmpty()
  @MaxLength(200)
  concurrencyKey?: string;

  @ApiPropertyOptional({ enum: ['allow', 'skip', 'queue'] })
  @IsOptional()
  @IsIn(['allow', 'skip', 'queue'])
  overlap?: 'allow' | 'skip' | 'queue';

  @ApiPropertyOptional({
    description:
      'Replace the schedule made at run time that has this name (default false: 409 DURABLE_SCHEDULE_CONFLICT)',
  })
  @IsOptional()
  @IsBoolean()
  replace?: boolean;
}
