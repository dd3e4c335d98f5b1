import { ArgumentMetadata, BadRequestException, ValidationPipe } from '@nestjs/common';
import type { ValidationError } from 'class-validator';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../util/json';

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

const invalid = (errors: FieldError[]) =>
  new BadRequestException({ statusCode: 400, message: 'Validation failed', errors });

const RAW_JSON = 'durable-execution:raw-json';

/**
 * Marks a DTO property that carries any JSON (a signal payload, a command result): the admin pipe
 * hands it over exactly as parsed. class-transformer and Nest's prototype-key stripping would drop
 * keys such as `constructor` (or throw on them), and they recurse without bound. @internal
 */
export function RawJson(): PropertyDecorator {
  return (target, key) => {
    const fields: string[] = Reflect.getMetadata(RAW_JSON, target.constructor) ?? [];
    Reflect.defineMetadata(RAW_JSON, [...fields, String(key)], target.constructor);
  };
}

/** Validates a copy whose @RawJson fields hold a stand-in of the same kind, then puts the originals back. */
class AdminValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (value === null || typeof value !== 'object') return super.transform(value, metadata);
    const body = { ...(value as Record<string, unknown>) };
    const raw: string[] = (metadata.metatype && Reflect.getMetadata(RAW_JSON, metadata.metatype)) ?? [];
    // A @RawJson field is not walked here: the codec checks its depth and size in the one walk that
    // stores it, and stops at the size cap (a wide body is not walked whole first).
    const deep = Array.isArray(value)
      ? nestedDeeperThan(value, MAX_JSON_DEPTH) && ['body']
      : Object.keys(body).filter((k) => !raw.includes(k) && nestedDeeperThan(body[k], MAX_JSON_DEPTH));
    if (deep && deep.length) {
      throw invalid(
        deep.map((field) => ({
          field,
          messages: [`${field} is nested deeper than ${MAX_JSON_DEPTH} levels`],
        })),
      );
    }
    if (Array.isArray(value)) return super.transform(value, metadata);
    const kept = raw.filter((f) => Object.hasOwn(body, f));
    for (const f of kept) body[f] = body[f] !== null && typeof body[f] === 'object' ? {} : body[f];
    const out = (await super.transform(body, metadata)) as Record<string, unknown>;
    for (const f of kept) out[f] = (value as Record<string, unknown>)[f];
    return out;
  }
}

/**
 * The admin API's validation: unknown fields are refused, values are transformed to the DTO's types,
 * @RawJson fields arrive byte for byte (their depth and size checked by the codec that stores them),
 * other values nested deeper than stored JSON may be are refused, and
 * a 400 names every bad field: `{ statusCode: 400, message: 'Validation failed', errors: [...] }`.
 * @internal
 */
export function adminValidationPipe(): ValidationPipe {
  return new AdminValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    exceptionFactory: (errors: ValidationError[]) => invalid(fieldErrors(errors)),
  });
}
