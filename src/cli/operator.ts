import { userInfo } from 'node:os';
import { CommandNotFoundError } from '../errors/command-not-found.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type { CommandResolution } from '../interfaces/command.interface';
import { RUN_STATUSES, RunStatus } from '../interfaces/run.interface';
import { Args, jsonValue, UsageError, wholeNumber } from './args';
import { checkOperatorInputs } from './operator-checks';
import { OPERATOR_COMMANDS } from './operator-commands';
import { Operator, OperatorTarget, withOperator } from './operator-context';
import {
  printCommand,
  printDetail,
  printList,
  printReleased,
  printRun,
  printSchedules,
  printVersions,
  printWorkers,
} from './operator-print';
import { printable, printableJson } from './printable';
import { withoutEngineEntries } from './engine-entries';
import { SCHEDULE_PATCH_COMMANDS, schedulePatchCommand } from './operator-schedule-patch';
import { forkCommand, forkOptions } from './operator-fork';

type Out = (line: string) => void;

/** The validated words and flags of an operator command. */
function check(command: string, args: Args): string[] {
  const spec = OPERATOR_COMMANDS[command];
  const given = [...args.values.keys(), ...args.lists.keys(), ...args.bools];
  const stray = given.find((f) => !spec.flags.includes(f));
  if (stray) throw new UsageError(`${command} takes no --${stray}`);
  const words = args.positional.slice(1);
  if (words.length !== spec.words.length)
    throw new UsageError(
      `${command} needs ${spec.words.join(' ') || 'no arguments'}, got ${words.length ? words.join(' ') : 'none'}`,
    );
  if (args.values.has('app') && args.bools.has('show-data'))
    throw new UsageError('--show-data applies without --app: with --app your redact hook decides');
  checkOperatorInputs(spec.words, words, args, spec.names);
  return words;
}

function operatorName(args: Args): string {
  const by = args.values.get('by');
  if (by !== undefined) return by;
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return 'cli';
  }
}

function statuses(args: Args): RunStatus[] | undefined {
  const list = args.lists.get('status');
  for (const s of list ?? [])
    if (!(RUN_STATUSES as readonly string[]).includes(s))
      throw new UsageError(`--status must be one of ${RUN_STATUSES.join(', ')}, got "${s}"`);
  return list as RunStatus[] | undefined;
}

function resolution(args: Args): CommandResolution {
  const as = args.values.get('as');
  if (as === 'succeeded') return { outcome: 'succeeded', result: jsonValue(args, 'result') ?? null };
  if (args.values.has('result')) throw new UsageError('--result goes with --as succeeded');
  if (as === 'failed') {
    const error = args.values.get('error');
    if (!error) throw new UsageError('--as failed needs --error TEXT (what the target answered)');
    return { outcome: 'failed', error };
  }
  if (args.values.has('error')) throw new UsageError('--error goes with --as failed');
  if (as === 'retry') return { outcome: 'retry' };
  throw new UsageError('resolve needs --as succeeded, --as failed or --as retry');
}

/** Refuses to release a worker whose presence row is live, unless forced. */
async function requireGone(op: Operator, workerId: string, force: boolean): Promise<void> {
  const row = (await op.workers.list()).find((w) => w.workerId === workerId);
  if (!row || !row.live || force) return;
  throw new InvalidArgumentError(
    'workerId',
    `is a live worker: its presence row was renewed at ` +
      `${row.seenAt?.toISOString()} and expires at ${row.expiresAt?.toISOString()}. Stop it first ` +
      '(its drain hands its runs on), or pass --force if you know it is gone',
  );
}

/**
 * Runs an operator command (`args.positional[0]` is its name, one of OPERATOR_COMMANDS); resolves to
 * the exit code. A usage problem throws UsageError before anything connects. Every line it prints
 * passes `printable` (control, line separator and bidi control characters as `\uXXXX`).
 */
export async function operatorCommand(
  args: Args,
  target: OperatorTarget,
  url: string | undefined,
  write: Out,
): Promise<number> {
  const command = args.positional[0];
  const words = check(command, args);
  const json = args.bools.has('json');
  const out: Out = (line) => write(printable(line));
  const print = (value: unknown, human: () => void) => (json ? write(printableJson(value)) : human());
  const by = operatorName(args);
  // Flags are read before connecting: a bad one costs no boot.
  const limit = wholeNumber(args, 'limit', 1);
  const version = wholeNumber(args, 'version', 1);
  const listStatuses = statuses(args);
  const resolveAs = command === 'resolve' ? resolution(args) : undefined;
  const payload = jsonValue(args, 'payload');
  const scheduleInput = command === 'fork' ? undefined : jsonValue(args, 'input');
  const fork = command === 'fork' ? forkOptions(args, by) : undefined;
  return withOperator(target, url, async (op) => {
    const [id, second] = words;
    if (SCHEDULE_PATCH_COMMANDS.includes(command)) await schedulePatchCommand(command, words, op, print, out);
    switch (command) {
      case 'list': {
        const page = await op.admin.list({
          kind: args.values.get('kind'),
          status: listStatuses,
          inDoubt: args.bools.has('in-doubt') || undefined,
          deadLettered: args.bools.has('dead-lettered') || undefined,
          limit,
          after: args.values.get('after'),
        });
        print(page, () => printList(out, page));
        break;
      }
      case 'show': {
        const all = await op.admin.detail(id, limit);
        const detail = args.bools.has('all') ? all : withoutEngineEntries(all);
        print(detail, () =>
          printDetail(out, detail, all.timeline.steps.length - detail.timeline.steps.length),
        );
        break;
      }
      case 'cancel':
      case 'retry': {
        const run = op.admin.shown(
          command === 'cancel'
            ? await op.runs.cancel(id, args.values.get('reason'), by)
            : await op.runs.retry(id, by),
        );
        print({ by, run }, () => printRun(out, run));
        break;
      }
      case 'fork':
        await forkCommand(op, id, fork!, print, out);
        break;
      case 'retry-held': {
        const res = await op.runs.retryHeld(id, { limit, version, by });
        print({ by, ...res }, () => out(`${res.retried} held run(s) of ${id} retried`));
        break;
      }
      case 'signal': {
        await op.runs.signal(id, second, payload ?? null, by);
        const run = await op.admin.run(id);
        print({ by, run }, () => {
          out(
            `signal ${JSON.stringify(second)} delivered (kept for a later wait if the run is not waiting yet)`,
          );
          printRun(out, run);
        });
        break;
      }
      case 'resolve':
      case 'approve':
      case 'reject': {
        if (!(await op.admin.commandOf(id, second))) throw new CommandNotFoundError(second);
        const note = args.values.get('note');
        if (command === 'resolve') await op.runs.resolveCommand(second, resolveAs!, by);
        else if (command === 'approve') await op.runs.approve(id, second, { by, note });
        else await op.runs.reject(id, second, { by, note });
        const [cmd, run] = [await op.admin.commandOf(id, second), await op.admin.run(id)];
        print({ by, command: cmd, run }, () => {
          printCommand(out, cmd);
          printRun(out, run);
        });
        break;
      }
      case 'versions': {
        const rows = await op.runs.versions(args.values.get('kind'));
        print(rows, () => printVersions(out, rows));
        break;
      }
      case 'workers': {
        const rows = await op.workers.list();
        print(rows, () => printWorkers(out, rows));
        break;
      }
      case 'schedules': {
        const rows = await op.schedules.list();
        print(rows, () => printSchedules(out, rows));
        break;
      }
      case 'pause':
      case 'resume': {
        const row = await op.schedules[command](id);
        print(row, () => printSchedules(out, [row]));
        break;
      }
      case 'create-schedule': {
        const row = await op.schedules.create(id, second, words[2], {
          timezone: args.values.get('timezone'),
          input: scheduleInput as Record<string, unknown> | undefined,
          catchUp: args.values.get('catch-up') as 'latest' | 'all' | 'skip' | undefined,
          overlap: args.values.get('overlap') as 'allow' | 'skip' | 'queue' | undefined,
          concurrencyKey: args.values.get('concurrency-key'),
          replace: args.bools.has('replace'),
        });
        const served = await op.workers.served(second);
        print(row, () => {
          printSchedules(out, [row]);
          if (!served)
            out(`warning: no live worker serves kind ${JSON.stringify(second)}: its runs wait for one`);
        });
        break;
      }
      case 'remove-schedule': {
        await op.schedules.remove(id);
        print({ removed: id }, () => out(`schedule ${id} removed (its runs stay)`));
        break;
      }
      case 'release-worker': {
        await requireGone(op, id, args.bools.has('force'));
        const released = await op.leases.releaseWorker(id);
        print({ by, workerId: id, released }, () => printReleased(out, id, released));
        break;
      }
    }
    return 0;
  });
}
