import { Transform, Type } from 'class-transformer';
import {
  IsBoolean,
  IsDate,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
} from 'class-validator';
import { RUN_STATUSES, RunStatus } from '../../interfaces/run.interface';

export { RUN_STATUSES };
import { ApiPropertyOptional } from '../../nest/openapi';
import { StorableText } from './run-actions.dto';
import { RUN_CURSOR_PATTERN } from '../../util/run-cursor';

/** `a,b` or `?s=a&s=b` → `['a', 'b']`. */
const list = ({ value }: { value: unknown }) =>
  value === undefined ? undefined : ([] as unknown[]).concat(value).flatMap((v) => String(v).split(','));
/** Only the strings `true` and `false` become booleans; anything else fails @IsBoolean with its value. */
const bool = ({ value }: { value: unknown }) => (value === 'true' ? true : value === 'false' ? false : value);

/** Query of `GET <path>/api/runs`: filters and keyset pagination (newest first). */
export class ListRunsQueryDto {
  @ApiPropertyOptional({ enum: RUN_STATUSES, isArray: true, description: 'One or more, comma-separated' })
  @IsOptional()
  @Transform(list)
  @IsIn(RUN_STATUSES, { each: true, message: `status must be one of ${RUN_STATUSES.join(', ')}` })
  status?: RunStatus[];

  @ApiPropertyOptional({ description: 'Workflow kind' })
  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(200)
  kind?: string;

  @ApiPropertyOptional({
    type: [String],
    description:
      'name=value, repeatable (`?tag=tenant=acme&tag=order=PO-17`): only runs with all of these tags',
  })
  @IsOptional()
  @Transform(({ value }) => (value === undefined ? undefined : ([] as unknown[]).concat(value)))
  @IsString({ each: true })
  @Matches(/^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}=./, { each: true, message: 'tag must be name=value' })
  tag?: string[];

  @ApiPropertyOptional({ type: String, format: 'date-time', description: 'Created at or after' })
  @IsOptional()
  @Type(() => Date)
  @IsDate({ message: 'createdFrom must be an ISO 8601 date' })
  createdFrom?: Date;

  @ApiPropertyOptional({ type: String, format: 'date-time', description: 'Created before' })
  @IsOptional()
  @Type(() => Date)
  @IsDate({ message: 'createdTo must be an ISO 8601 date' })
  createdTo?: Date;

  @ApiPropertyOptional({ description: 'Only dead-lettered runs (true) or none of them (false)' })
  @IsOptional()
  @Transform(bool)
  @IsBoolean({ message: 'deadLettered must be true or false' })
  deadLettered?: boolean;

  @ApiPropertyOptional({ description: 'Only runs with an in-doubt command (true) or without (false)' })
  @IsOptional()
  @Transform(bool)
  @IsBoolean({ message: 'inDoubt must be true or false' })
  inDoubt?: boolean;

  @ApiPropertyOptional({ minimum: 1, maximum: 500, default: 50 })
  @IsOptional()
  @Type(() => Number)
  @IsInt({ message: 'limit must be an integer' })
  @Min(1)
  @Max(500)
  limit?: number;

  @ApiPropertyOptional({ description: 'The `next` cursor of the previous page' })
  @IsOptional()
  @IsString()
  @Matches(RUN_CURSOR_PATTERN, { message: 'after must be a cursor returned as next' })
  after?: string;
}
