import { plainToInstance } from 'class-transformer';
import { validateSync, ValidationError } from 'class-validator';
import { DurableExecutionOptionsSchema } from './durable-execution-options.schema';

function flatten(errors: ValidationError[], prefix = ''): string[] {
  const out: string[] = [];
  for (const e of errors) {
    const path = prefix ? `${prefix}.${e.property}` : e.property;
    for (const [rule, msg] of Object.entries(e.constraints ?? {})) {
      // forbidNonWhitelisted: a key the options do not have, most likely misspelt.
      out.push(rule === 'whitelistValidation' ? `${path}: unknown option (misspelt?)` : `${path}: ${msg}`);
    }
    if (e.children?.length) out.push(...flatten(e.children, path));
  }
  return out;
}

/**
 * The problems class-validator finds in the options (`DurableExecutionOptionsSchema`), one line each,
 * prefixed with the option's path. Required by resolveOptions only when `optionsLookValid` is not sure:
 * a boot with valid options loads neither class-validator nor class-transformer. @internal
 */
export function optionProblems(options: Record<string, unknown>): string[] {
  const schema = plainToInstance(DurableExecutionOptionsSchema, options);
  return flatten(
    validateSync(schema, { forbidUnknownValues: false, whitelist: true, forbidNonWhitelisted: true }),
  );
}
