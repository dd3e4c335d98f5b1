import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { RawJson } from '../admin-validation.pipe';
import { ApiProperty, ApiPropertyOptional } from '../../nest/openapi';
import { StorableText } from './run-actions.dto';

/**
 * Body of `POST api/runs/:id/fork` (`RunRepository.fork`, docs/TIME-TRAVEL.md). `input` and `editResult`
 * arrive as sent and are checked where they are stored (plain JSON within the limits).
 */
export class ForkRunDto {
  @ApiProperty({
    minimum: 0,
    description: 'The first step the fork runs itself; what came before is inherited',
  })
  @IsInt()
  @Min(0)
  @Max(999_999_999)
  fromStep!: number;

  @ApiPropertyOptional({ minimum: 1, description: 'The version of the kind the fork runs under' })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2_147_483_647)
  version?: number;

  @ApiPropertyOptional({ description: "The fork's input (default: the original's)" })
  @IsOptional()
  @RawJson()
  input?: unknown;

  @ApiPropertyOptional({
    description: '{ step, value }: a new result for the last step the fork inherits',
  })
  @IsOptional()
  @RawJson()
  editResult?: { step: number; value: unknown };

  @ApiPropertyOptional({
    enum: ['leave', 'cancel'],
    description: 'Required while the original has not ended: leave it going, or cancel it with the fork',
  })
  @IsOptional()
  @IsIn(['leave', 'cancel'], { message: 'original must be leave or cancel' })
  original?: 'leave' | 'cancel';

  @ApiPropertyOptional({
    description:
      "The fork's commands send the original's keys (a deduplicating target answers with the original's effect)",
  })
  @IsOptional()
  @IsBoolean()
  keepKeys?: boolean;

  @ApiPropertyOptional({
    description: 'Rewind in place: the run itself (failed or dead-lettered) goes back to fromStep',
  })
  @IsOptional()
  @IsBoolean()
  inPlace?: boolean;

  @ApiPropertyOptional({ maxLength: 255, description: 'A repeated fork with this key is the same fork' })
  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(255)
  idempotencyKey?: string;
}
