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
