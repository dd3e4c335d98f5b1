/** The operator commands of the CLI: their words, their flags, and the usage text. @internal */
const COMMON = ['url', 'schema', 'app', 'json', 'show-data', 'help'];
const ACTION = [...COMMON, 'by'];

/**
 * Each operator command: its words after the command name and the flags it takes; `names`: each word is
 * an identifier (at most 200 characters, no control, line separator or bidi control character), checked
 * before connecting (a usage error).
 */
export const OPERATOR_COMMANDS: Record<string, { words: string[]; flags: string[]; names?: true }> = {
  list: { words: [], flags: [...COMMON, 'kind', 'status', 'in-doubt', 'dead-lettered', 'limit', 'after'] },
  show: { words: ['RUN'], flags: [...COMMON, 'limit', 'all'] },
  cancel: { words: ['RUN'], flags: [...ACTION, 'reason'] },
  retry: { words: ['RUN'], flags: ACTION },
  fork: {
    words: ['RUN'],
    flags: [
      ...ACTION,
      'from',
      'version',
      'input',
      'edit-step',
      'edit-value',
      'original',
      'key',
      'keep-keys',
      'in-place',
    ],
  },
  'retry-held': { words: ['KIND'], flags: [...ACTION, 'limit', 'version'] },
  versions: { words: [], flags: [...COMMON, 'kind'] },
  signal: { words: ['RUN', 'NAME'], flags: [...ACTION, 'payload'] },
  resolve: { words: ['RUN', 'KEY'], flags: [...ACTION, 'as', 'result', 'error'] },
  approve: { words: ['RUN', 'KEY'], flags: [...ACTION, 'note'] },
  reject: { words: ['RUN', 'KEY'], flags: [...ACTION, 'note'] },
  workers: { words: [], flags: COMMON },
  'release-worker': { words: ['WORKER'], flags: [...COMMON, 'force'] },
  schedules: { words: [], flags: COMMON },
  pause: { words: ['SCHEDULE'], flags: COMMON },
  resume: { words: ['SCHEDULE'], flags: COMMON },
  'create-schedule': {
    words: ['SCHEDULE', 'KIND', 'CRON'],
    flags: [...COMMON, 'timezone', 'input', 'catch-up', 'overlap', 'concurrency-key', 'replace'],
  },
  'remove-schedule': { words: ['SCHEDULE'], flags: COMMON },
  trigger: { words: ['SCHEDULE'], flags: COMMON, names: true },
  'patch-status': { words: ['KIND', 'PATCH'], flags: COMMON, names: true },
};

export const OPERATOR_USAGE = `Operator commands (the same checks as the admin API; --json prints what it answers):
  list                 runs, newest first: [--kind K] [--status S]... [--in-doubt] [--dead-lettered]
                       [--limit N] [--after CURSOR]
  show RUN             the run, its steps, commands and event trail (the newest --limit N, default 200);
                       --all: the engine's entries among the steps too ($sleep, $signal:…, command:…)
  cancel RUN           [--reason TEXT]
  retry RUN            a failed, dead-lettered or held run, from its last checkpoint
  fork RUN             a new run inheriting RUN's record before --from STEP, running from there
                       (docs/TIME-TRAVEL.md): [--version V] [--input JSON] [--edit-step N --edit-value
                       JSON: the last inherited result] [--original leave|cancel: needed while RUN
                       has not ended] [--key KEY: a repeated fork with it is the same fork]
                       [--keep-keys: its commands send RUN's keys] [--in-place: RUN itself, failed or
                       dead-lettered, goes back to STEP under its next generation]
  retry-held KIND      every run of KIND held for non-determinism [--limit N, default 1000]
                       [--version V: only those pinned to version V]
  versions             each version of each kind [--kind K]: unfinished runs pinned to it, held
                       ones, live workers that run it (a version no run holds can be retired)
  signal RUN NAME      [--payload JSON]
  resolve RUN KEY      settle an in-doubt command: --as succeeded [--result JSON] | --as failed
                       --error TEXT | --as retry (dispatch again with the same key)
  approve RUN KEY      a command awaiting approval [--note TEXT]; reject RUN KEY likewise
  workers              each worker: live or not, the kinds (@versions) it serves, the runs it holds
  release-worker ID    hand a dead worker's runs on now; refused while its presence row is live
                       (--force: it is gone but its row has not expired yet)
  schedules            the @DurableCron schedules: next and last tick, paused or not
  pause SCHEDULE       its ticks start nothing until resume SCHEDULE (from its next tick after now)
  create-schedule SCHEDULE KIND CRON
                       a schedule made at run time (quote CRON: '0 2 * * *'), fired like a @DurableCron:
                       [--timezone TZ] [--input JSON] [--catch-up latest|all|skip]
                       [--overlap allow|skip|queue] [--concurrency-key KEY]; a name in use is refused
                       unless --replace (replaces one made at run time; a @DurableCron's never)
  remove-schedule SCHEDULE
                       delete a schedule made at run time (its runs stay); a @DurableCron's: pause it
  trigger SCHEDULE     fire it now; prints the ids of the runs it started. Its next tick fires early
                       (the run that tick starts, same key), then it waits for the tick after
  patch-status KIND PATCH
                       open runs of KIND on ctx.patched(PATCH)'s new path, and those that may take the
                       old one (at 0: replace patched with deprecatePatch)
  Actions are recorded in the run's trail with --by NAME (default cli:<your user name>).
  Run data is shown through your app's redact hook with --app FILE[#Export]; without --app it is
  hidden unless --show-data.`;
