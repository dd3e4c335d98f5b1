import { OPERATOR_TEXT_LIMITS } from '../admin/admin.constants';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { requireText } from '../util/arguments';
import { requireShortText } from '../util/run-keys';
import { isUuid } from '../util/uuid';
import { Args, UsageError } from './args';

/**
 * Checks made before anything connects, each a usage error (exit 2): every RUN word is a run id (a
 * UUID), and the text flags hold what the admin API takes for the same field: `--reason`, `--note` and
 * `--error` storable text within its caps (OPERATOR_TEXT_LIMITS), `--by` an identifier (at most 200
 * characters, no control, line separator or bidi control character), and so is every word of a command
 * whose words are `names`. @internal
 */
export function checkOperatorInputs(wordNames: string[], words: string[], args: Args, names = false): void {
  wordNames.forEach((name, i) => {
    if (names) usage(() => requireShortText(words[i], name));
    if (name === 'RUN' && !isUuid(words[i]))
      throw new UsageError(
        `RUN must be a run id (a UUID such as 0f8fad5b-d9cb-469f-a165-70867728950e), got ${JSON.stringify(String(words[i]).slice(0, 60))}`,
      );
  });
  for (const [flag, max] of Object.entries(OPERATOR_TEXT_LIMITS)) {
    const value = args.values.get(flag);
    if (value === undefined) continue;
    if (value.length > max)
      throw new UsageError(`--${flag} must be at most ${max} characters, got ${value.length}`);
    usage(() => requireText(value, `--${flag}`));
  }
  const by = args.values.get('by');
  if (by !== undefined) usage(() => requireShortText(by, '--by'));
}

/** Runs a library check, its InvalidArgumentError as a usage error. */
function usage(check: () => unknown): void {
  try {
    check();
  } catch (e) {
    if (e instanceof InvalidArgumentError) throw new UsageError(e.message);
    throw e;
  }
}
