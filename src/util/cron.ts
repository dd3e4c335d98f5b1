import { createRequire } from 'node:module';
import type * as Cron from 'cron';

/** `cron`, as `@nestjs/schedule` resolves it (the version its registry takes). @internal */
export function cronPackage(): typeof Cron {
  return createRequire(require.resolve('@nestjs/schedule'))('cron') as typeof Cron;
}

/** Why `expression` is not a cron expression, or null when it is one. @internal */
export function cronProblem(expression: unknown): string | null {
  if (typeof expression !== 'string' || !expression.trim())
    return 'must be a cron expression such as CronExpression.EVERY_5_SECONDS ("*/5 * * * * *")';
  try {
    new (cronPackage().CronTime)(expression);
    return null;
  } catch (err) {
    return `is not a cron expression (${(err as Error).message})`;
  }
}
