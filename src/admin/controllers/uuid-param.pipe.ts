import { BadRequestException, ParseUUIDPipe } from '@nestjs/common';

/** `:id` must be a UUID; otherwise a 400 in the admin API's field-error shape. @internal */
export const runIdPipe = () =>
  new ParseUUIDPipe({
    exceptionFactory: () =>
      new BadRequestException({
        statusCode: 400,
        message: 'Validation failed',
        errors: [{ field: 'id', messages: ['id must be a UUID'] }],
      }),
  });
