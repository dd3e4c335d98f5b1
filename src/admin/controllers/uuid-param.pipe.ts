import { BadRequestException, PipeTransform } from '@nestjs/common';
import { isUuid } from '../../util/uuid';

/** `:id` must be a UUID (the check RunRepository makes); otherwise a 400 in the admin API's field-error shape. @internal */
export const runIdPipe = (): PipeTransform<unknown, string> => ({
  transform(value: unknown): string {
    if (isUuid(value)) return value;
    throw new BadRequestException({
      statusCode: 400,
      message: 'Validation failed',
      errors: [{ field: 'id', messages: ['id must be a UUID'] }],
    });
  },
});

/**
 * `:stepIndex` must be a whole number of at most 9 digits (as typed: the parameter is declared a string,
 * so nothing converts `1e3` or `0x1` before); otherwise a 400 naming it. @internal
 */
export const stepIndexPipe = (): PipeTransform<unknown, string> => ({
  transform(value: unknown): string {
    if (typeof value === 'string' && /^\d{1,9}$/.test(value)) return value;
    throw new BadRequestException({
      statusCode: 400,
      message: 'Validation failed',
      errors: [{ field: 'stepIndex', messages: ['stepIndex must be a whole number (at most 9 digits)'] }],
    });
  },
});
