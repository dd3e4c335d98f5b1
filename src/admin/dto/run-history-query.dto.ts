import { applyDecorators } from '@nestjs/common';
import { Type } from 'class-transformer';
import { IsInt, IsOptional, IsString, Matches, Max, Min, ValidateBy } from 'class-validator';
import { ApiPropertyOptional } from '../../nest/openapi';

/** How many events and checkpoints a run's detail shows by default (the newest), and at most. */
export const DETAIL_HISTORY_LIMIT = 200;
/** Largest page of events or checkpoints (and largest detail `limit`) the admin API serves. */
export const MAX_ADMIN_HISTORY_LIMIT = 500;

/**
 * A change token of `GET .../changes`: the run row's version (xmin) and its newest event id. Opaque to
 * clients; compared as text.
 */
export const CHANGES_TOKEN_PATTERN = /^\d{1,10}\.\d{1,19}$/;

/** The token for a run row version and newest event id (0 when it has none). */
export const changesToken = (rowVersion: string, lastEventId: number | null): string =>
  `${rowVersion}.${lastEventId ?? 0}`;

/** Refused when the property named `other` is given too. */
const NotWith = (other: string) =>
  ValidateBy({
    name: 'notWith',
    constraints: [other],
    validator: {
      validate: (_v: unknown, a) => (a?.object as Record<string, unknown>)[other] === undefined,
      defaultMessage: (a) => `${a?.property} cannot be given with ${other}`,
    },
  });

/** An event id or a step index from the query string. */
const Position = (name: string) =>
  applyDecorators(
    IsOptional(),
    Type(() => Number),
    IsInt({ message: `${name} must be an integer (an event id or a step index)` }),
    Min(0),
    Max(Number.MAX_SAFE_INTEGER),
  );

const Limit = () =>
  applyDecorators(
    ApiPropertyOptional({ minimum: 1, maximum: MAX_ADMIN_HISTORY_LIMIT, default: DETAIL_HISTORY_LIMIT }),
    IsOptional(),
    Type(() => Number),
    IsInt({ message: 'limit must be an integer' }),
    Min(1),
    Max(MAX_ADMIN_HISTORY_LIMIT),
  );

/** Query of `GET <path>/api/runs/:id`: how many of the newest events and checkpoints to show. */
export class RunDetailQueryDto {
  @Limit()
  limit?: number;
}

/**
 * Query of `GET <path>/api/runs/:id/events` and `.../checkpoints`: keyset paging by event id or step
 * index. `after` reads oldest first, `before` newest first; neither: from the oldest.
 */
export class RunHistoryQueryDto {
  @ApiPropertyOptional({ description: 'Only those after this event id / step index, oldest first' })
  @Position('after')
  after?: number;

  @ApiPropertyOptional({
    description: 'Only those before this event id / step index, newest first (not with after)',
  })
  @Position('before')
  @NotWith('after')
  before?: number;

  @Limit()
  limit?: number;
}

/** Query of `GET <path>/api/runs/:id/changes`. */
export class RunChangesQueryDto {
  @ApiPropertyOptional({ description: 'The token of the detail or of the previous answer' })
  @IsOptional()
  @IsString()
  @Matches(CHANGES_TOKEN_PATTERN, { message: 'since must be a token returned by this API' })
  since?: string;
}
