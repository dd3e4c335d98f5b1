import { InvalidOptionsError } from '../../src/errors/invalid-options.error';
import type { DurableExecutionModuleOptions } from '../../src/options/durable-execution-options.interface';
import { resolveOptions } from '../../src/options/resolve-options';

/**
 * Shared by the unit specs src/options/resolve-options.*.spec.ts. It lives here, not next to them: a
 * file there that is not a spec would be built into dist/.
 */
export const URL = 'postgres://root@127.0.0.1:5432/test';

/** Calls resolveOptions with anything (bad shapes included) and returns the error it throws. */
export function failure(raw: unknown): InvalidOptionsError {
  try {
    resolveOptions(raw as DurableExecutionModuleOptions);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionsError);
    return err as InvalidOptionsError;
  }
  throw new Error(`resolveOptions accepted ${JSON.stringify(raw)}`);
}
