import { applyDecorators } from '@nestjs/common';
import {
  IsDefined,
  IsIn,
  IsInt,
  IsNotEmpty,
  Max,
  Min,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  ValidateBy,
  ValidateIf,
} from 'class-validator';
import { unstorableText } from '../../util/json';
import { unsafeTextProblem } from '../../util/safe-text';
import { PATCH_ID } from '../../engine/steps/patch-step';
import { RawJson } from '../admin-validation.pipe';
import { ApiProperty, ApiPropertyOptional } from '../../nest/openapi';
import { OPERATOR_TEXT_LIMITS as LIMITS } from '../admin.constants';

/** A string PostgreSQL can store (no NUL, no lone surrogate); other types are left to @IsString. */
export const StorableText = () =>
  ValidateBy({
    name: 'storableText',
    validator: {
      validate: (v: unknown) => typeof v !== 'string' || unstorableText(v) === null,
      defaultMessage: (a) => `${a?.property} ${unstorableText(String(a?.value))}`,
    },
  });

/**
 * An identifier by the one rule the API, the CLI and the start path apply (util/safe-text: no control,
 * line separator or bidi control character); other types are left to @IsString.
 */
export const SafeIdentifier = () =>
  ValidateBy({
    name: 'safeIdentifier',
    validator: {
      validate: (v: unknown) => typeof v !== 'string' || unsafeTextProblem(v) === null,
      defaultMessage: (a) => `${a?.property} ${unsafeTextProblem(String(a?.value))}`,
    },
  });

/** Body of `POST .../cancel`. */
export class CancelRunDto {
  @ApiPropertyOptional({ maxLength: LIMITS.reason })
  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(LIMITS.reason)
  reason?: string;
}

/** Body of `POST .../retry` (nothing to say but who, which comes from the guard). */
export class RetryRunDto {}

/**
 * A workflow kind in a body or query: a storable string of 1 to 200 characters. `identifier`: also the
 * identifier rule, as `start()` and the CLI take it (not where a kind stored before the rule must still
 * be reachable, as `retry-held`).
 */
const KindField = (identifier = false) =>
  applyDecorators(
    ApiProperty({ maxLength: 200, description: 'The workflow kind' }),
    IsString(),
    StorableText(),
    ...(identifier ? [SafeIdentifier()] : []),
    IsNotEmpty(),
    MaxLength(200),
  );

/** Body of `POST api/runs/retry-held`: the kind whose held runs to re-drive, and at most how many. */
export class RetryHeldDto {
  @KindField()
  kind!: string;

  @ApiPropertyOptional({ minimum: 1, maximum: 10000, default: 1000 })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(10000)
  limit?: number;

  @ApiPropertyOptional({ minimum: 1, description: 'Only the runs pinned to this version of the kind' })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2_147_483_647)
  version?: number;
}

/** Query of `GET api/patch-status`: a kind and the id of a `ctx.patched(id)` of its workflow. */
export class PatchStatusQueryDto {
  @KindField(true)
  kind!: string;

  @ApiProperty({ maxLength: 100, description: 'The patch id given to ctx.patched(id)' })
  @IsString()
  @Matches(PATCH_ID, {
    message: 'patchId must be 1-100 letters, digits and . _ : - (starting with a letter or digit)',
  })
  patchId!: string;
}

/** Query of `GET api/versions`: one kind's versions, or every kind's. */
export class VersionsQueryDto {
  @ApiPropertyOptional({ maxLength: 200, description: 'The workflow kind (default: every kind)' })
  @IsOptional()
  @IsString()
  @StorableText()
  @IsNotEmpty()
  @MaxLength(200)
  kind?: string;
}

/** Body of `POST .../approve` and `POST .../reject`. */
export class CommandDecisionDto {
  @ApiProperty({ description: "The command's idempotency key (from the run's commands)" })
  @IsString()
  @StorableText()
  @IsNotEmpty()
  @MaxLength(1000)
  key!: string;

  @ApiPropertyOptional({ maxLength: LIMITS.note })
  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(LIMITS.note)
  note?: string;
}

/** Body of `POST .../resolve`: settle an in-doubt command. */
export class ResolveCommandDto {
  @ApiProperty()
  @IsString()
  @StorableText()
  @IsNotEmpty()
  @MaxLength(1000)
  key!: string;

  @ApiProperty({ enum: ['succeeded', 'failed', 'retry'] })
  @IsIn(['succeeded', 'failed', 'retry'], { message: 'outcome must be succeeded, failed or retry' })
  outcome!: 'succeeded' | 'failed' | 'retry';

  @ApiPropertyOptional({ description: 'With `succeeded`: the result the target reports (JSON)' })
  @ValidateIf((o: ResolveCommandDto) => o.outcome === 'succeeded' && o.result === undefined)
  @IsDefined({ message: 'result is required when outcome is succeeded (null is allowed)' })
  @RawJson()
  result?: unknown;

  @ApiPropertyOptional({ description: 'With `failed`: why' })
  @ValidateIf((o: ResolveCommandDto) => o.outcome === 'failed')
  @IsString()
  @StorableText()
  @IsNotEmpty({ message: 'error must say why the command failed' })
  @MaxLength(LIMITS.error)
  error?: string;
}

/** Body of `POST .../signal`. */
export class SendSignalDto {
  @ApiProperty({ maxLength: 200 })
  @IsString()
  @StorableText()
  @IsNotEmpty()
  @MaxLength(200)
  name!: string;

  @ApiPropertyOptional({ description: 'Any JSON value' })
  @IsOptional()
  @RawJson()
  payload?: unknown;
}
