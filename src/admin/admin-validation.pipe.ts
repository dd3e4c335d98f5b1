import { BadRequestException, ValidationPipe } from '@nestjs/common';
import type { ValidationError } from 'class-validator';

/** One invalid field and why, in the shape every 400 of the admin API uses. */
export interface FieldError {
  field: string;
  messages: string[];
}

/** class-validator errors → `[{ field: 'a.b', messages }]`, nested properties with dotted paths. @internal */
export function fieldErrors(errors: ValidationError[], parent = ''): FieldError[] {
  return errors.flatMap((e) => {
    const field = parent ? `${parent}.${e.property}` : e.property;
    const own = e.constraints ? [{ field, messages: Object.values(e.constraints) }] : [];
    return [...own, ...fieldErrors(e.children ?? [], field)];
  });
}

/**
 * The admin API's validation: unknown fields are refused, values are transformed to the DTO's types,
 * and a 400 names every bad field: `{ statusCode: 400, message: 'Validation failed', errors: [...] }`.
 * @internal
 */
export function adminValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    exceptionFactory: (errors: ValidationError[]) =>
      new BadRequestException({ statusCode: 400, message: 'Validation failed', errors: fieldErrors(errors) }),
  });
}
