import { createRequire } from 'node:module';
import type * as Cron from 'cron';
import { unsafeTextProblem } from './safe-text';

/** `cron`, as `@nestjs/schedule` resolves it (the version its registry takes). @internal */
export function cronPackage(): typeof Cron {
  return createRequire(require.resolve('@nestjs/schedule'))('cron') as typeof Cron;
}

/**
 * Why `expression` is not a cron expression that fires, or null when it is one: it must pass the
 * identifier rule (util/safe-text), parse, and match a date within the next years (`0 0 30 2 *`, the
 * 30th of February, never does: `cron` would throw a CronError at its first tick). @internal
 */
export function cronProblem(expression: unknown): string | null {
  if (typeof expression !== 'string' || !expression.trim())
    return 'must be a cron expression such as CronExpression.EVERY_5_SECONDS ("*/5 * * * * *")';
  const unsafe = unsafeTextProblem(expression);
  if (unsafe) return unsafe;
  let time: InstanceType<typeof Cron.CronTime>;
  try {
    time = new (cronPackage().CronTime)(expression);
  } catch (err) {
    return `is not a cron expression (${(err as Error).message})`;
  }
  try {
    time.getNextDateFrom(new Date());
    return null;
  } catch {
    return 'never fires: no date in the next 8 years matches it (such as the 30th of February); check its day-of-month and month fields';
  }
}
