import type { ForkRunOptions } from '../interfaces/run-fork.interface';
import { Args, jsonValue, UsageError, wholeNumber } from './args';
import type { Operator } from './operator-context';
import { printRun } from './operator-print';

type Out = (line: string) => void;
type Print = (value: unknown, human: () => void) => void;

/**
 * The options of `fork RUN --from STEP`, read before anything connects (a usage error names the flag):
 * `--version V`, `--input JSON`, `--edit-step N` with `--edit-value JSON` (the last inherited result,
 * docs/TIME-TRAVEL.md), `--original leave|cancel`, `--key KEY` (the fork's idempotency key). @internal
 */
export function forkOptions(args: Args, by: string): ForkRunOptions {
  const fromStep = wholeNumber(args, 'from', 0);
  if (fromStep === undefined)
    throw new UsageError('fork needs --from STEP (the first step the fork runs itself)');
  const original = args.values.get('original');
  if (original !== undefined && original !== 'leave' && original !== 'cancel')
    throw new UsageError(`--original must be leave or cancel, got ${JSON.stringify(original)}`);
  const editStep = wholeNumber(args, 'edit-step', 0);
  if ((editStep === undefined) !== !args.values.has('edit-value'))
    throw new UsageError('--edit-step N and --edit-value JSON go together');
  return {
    fromStep,
    version: wholeNumber(args, 'version', 1),
    ...(args.values.has('input') && { input: jsonValue(args, 'input') }),
    ...(editStep !== undefined && { editResult: { step: editStep, value: jsonValue(args, 'edit-value') } }),
    original,
    idempotencyKey: args.values.get('key'),
    ...(args.bools.has('keep-keys') && { keepKeys: true }),
    ...(args.bools.has('in-place') && { inPlace: true }),
    by,
  };
}

/** `fork RUN`: `RunRepository.fork`, then the fork as `show` prints a run, and its link. @internal */
export async function forkCommand(op: Operator, id: string, opts: ForkRunOptions, print: Print, out: Out) {
  const { run, created, inherited } = await op.runs.fork(id, opts);
  const shown = op.admin.shown(run);
  print({ by: opts.by, created, inherited, run: shown }, () => {
    out(
      opts.inPlace
        ? `rewound ${id} to step ${opts.fromStep} (generation ${run.generation}): it keeps ${inherited} step(s)`
        : created
          ? `forked ${id} from step ${opts.fromStep}: run ${run.id} inherits ${inherited} checkpoint(s)`
          : `the fork with key ${JSON.stringify(opts.idempotencyKey)} exists already: run ${run.id}`,
    );
    printRun(out, shown);
  });
}
