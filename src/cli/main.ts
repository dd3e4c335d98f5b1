#!/usr/bin/env node
/*
 * The package's bin: `npx nestjs-durable-execution migrate | status | revert | export | replay | list | show |
 * cancel | retry | signal | resolve | approve | reject | workers | release-worker [--url URL] [--schema NAME]`,
 * on the database in `--url` or else `DATABASE_URL`, in the schema `--schema` or else
 * `DURABLE_EXECUTION_SCHEMA` (default public). Exit codes: 0 done, 1 failed (one line on stderr),
 * 2 bad usage (the usage on stderr).
 */
import 'reflect-metadata';
import { schemaNameProblem } from '../options/schema-name';
import {
  durableMigrationStatus,
  DURABLE_MIGRATIONS_TABLE,
  revertDurableMigrations,
  runDurableMigrations,
} from '../store/run-migrations';
import { durableNames } from '../store/durable-names';
import { Args, parseArgs, UsageError, wholeNumber } from './args';
import { operatorCommand } from './operator';
import { OPERATOR_COMMANDS, OPERATOR_USAGE } from './operator-commands';
import { printable } from './printable';
import { exportRun, replayWithApp, ReplayTargets } from './replay';

export const USAGE = `Usage: nestjs-durable-execution <command> [--url postgres://...] [--schema NAME]

Commands:
  migrate        apply the module's pending migrations (under an advisory lock)
  status         list each of the module's migrations as applied or pending
  revert         revert the last applied migration (--all: every one, newest first)
  export         write runs' records as history documents: --run ID (repeatable) [--out FILE]
  replay         replay recorded runs against your workflow code, nothing executed or written:
                 --app FILE[#Export] (your compiled app module, AppModule by default) and
                 --kind KIND [--limit N] | --run ID | --history FILE (each repeatable);
                 exit 1 when a run asks for other calls, leaves recorded ones unasked or
                 returns another output (the check to run before deploying a changed workflow);
                 a run held for non-determinism is replayed too: "held: replays now" (retry-held
                 resumes it) or "held: still diverges" (exit 1)

${OPERATOR_USAGE}

The database is --url, else the DATABASE_URL environment variable.
The schema of the module's tables is --schema, else DURABLE_EXECUTION_SCHEMA, else public: the same as
database.schema in the module's options (migrate creates it when missing).
Migrations are recorded in ${DURABLE_MIGRATIONS_TABLE} in that schema, apart from your app's own migrations table.`;

const MIGRATION_FLAGS = ['url', 'schema', 'help'];

/** The flags each command other than the operator ones takes. */
const COMMAND_FLAGS: Record<string, string[]> = {
  migrate: MIGRATION_FLAGS,
  status: MIGRATION_FLAGS,
  revert: [...MIGRATION_FLAGS, 'all'],
  export: [...MIGRATION_FLAGS, 'run', 'out'],
  replay: ['app', 'kind', 'limit', 'run', 'history', 'help'],
};

type Command = 'migrate' | 'status' | 'revert' | 'export' | 'replay' | 'help' | 'operator';

interface Parsed {
  command: Command;
  args: Args;
  url?: string;
  schema?: string;
  replay: ReplayTargets & { out?: string };
}

/** The schema from `--schema`, else `DURABLE_EXECUTION_SCHEMA`; a usage error naming where a bad one came from. */
function schemaOf(flag: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  const [from, schema] =
    flag !== undefined ? ['--schema', flag] : ['DURABLE_EXECUTION_SCHEMA', env.DURABLE_EXECUTION_SCHEMA];
  if (schema === undefined || schema === '') return undefined;
  const problem = schemaNameProblem(schema);
  if (problem) throw new UsageError(`${from}: ${problem}`);
  return schema;
}

function parse(argv: string[], env: NodeJS.ProcessEnv): Parsed {
  const args = parseArgs(argv);
  const { positional } = args;
  const replay: Parsed['replay'] = {
    app: args.values.get('app') ?? '',
    runIds: args.lists.get('run') ?? [],
    histories: args.lists.get('history') ?? [],
    kind: args.values.get('kind'),
    out: args.values.get('out'),
  };
  const url = args.values.get('url');
  if (args.bools.has('help') || positional[0] === 'help') return { command: 'help', args, url, replay };
  const schema = schemaOf(args.values.get('schema'), env);
  if (!positional.length) throw new UsageError('no command given');
  const command = positional[0];
  if (OPERATOR_COMMANDS[command]) return { command: 'operator', args, url, schema, replay };
  if (!COMMAND_FLAGS[command]) throw new UsageError(`unknown command "${command}"`);
  if (positional.length !== 1) throw new UsageError(`one command expected, got ${positional.join(' ')}`);
  const given = [...args.values.keys(), ...args.lists.keys(), ...args.bools];
  const stray = given.find((f) => !COMMAND_FLAGS[command].includes(f));
  if (stray)
    throw new UsageError(stray === 'all' ? '--all applies to revert only' : `${command} takes no --${stray}`);
  if (command === 'export' && !replay.runIds.length) throw new UsageError('export needs --run ID');
  if (command === 'replay') {
    replay.limit = wholeNumber(args, 'limit', 1);
    if (!replay.app) throw new UsageError('replay needs --app FILE[#Export] (your compiled app module)');
    if (!replay.kind && !replay.runIds.length && !replay.histories.length)
      throw new UsageError('replay needs --kind KIND, --run ID or --history FILE');
  }
  return { command: command as Command, args, url, schema, replay };
}

/**
 * The message of `err` on one line, `printable` (it may quote a stored value); pg's connection failures
 * can be an AggregateError with none.
 */
function oneLine(err: unknown): string {
  const e = err as { message?: string; code?: string; errors?: { message?: string }[] };
  const message = e?.message || e?.errors?.map((x) => x.message).find(Boolean) || e?.code || String(err);
  return printable(message.replace(/\s*\n\s*/g, ' '));
}

type Out = (line: string) => void;

/** Runs one command line; resolves to the process exit code. */
export async function cli(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  out: Out = (l) => process.stdout.write(`${l}\n`),
  err: Out = (l) => process.stderr.write(`${l}\n`),
): Promise<number> {
  let parsed: Parsed;
  try {
    parsed = parse(argv, env);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    err(`nestjs-durable-execution: ${printable(e.message)}\n\n${USAGE}`);
    return 2;
  }
  if (parsed.command === 'help') {
    out(USAGE);
    return 0;
  }
  try {
    if (parsed.command === 'replay') return await replayWithApp(parsed.replay, (l) => out(printable(l)));
    const url = parsed.url ?? env.DATABASE_URL;
    if (parsed.command === 'operator') {
      const target = {
        app: parsed.args.values.get('app'),
        url,
        schema: parsed.schema,
        showData: parsed.args.bools.has('show-data'),
      };
      return await operatorCommand(parsed.args, target, url, out);
    }
    if (!url) {
      throw new Error(
        'DATABASE_URL is not set: export the connection string of the target database, or pass --url',
      );
    }
    const options = { type: 'postgres' as const, url };
    const schema = { schema: parsed.schema };
    if (parsed.command === 'export')
      return await exportRun(url, parsed.schema, parsed.replay.runIds, parsed.replay.out, out);
    if (parsed.command === 'migrate') {
      const ran = await runDurableMigrations(options, schema);
      out(
        ran.length ? `durable-execution: applied ${ran.join(', ')}` : 'durable-execution: schema up to date',
      );
    } else if (parsed.command === 'status') {
      const { migrations, unrecordedTables } = await durableMigrationStatus(options, schema);
      for (const m of migrations) out(`${m.applied ? 'applied' : 'pending'}  ${m.name}`);
      if (unrecordedTables.length) {
        out(
          `note: ${unrecordedTables.join(', ')} exist with no record in ${durableNames(parsed.schema).label(DURABLE_MIGRATIONS_TABLE)}: ` +
            "your app's own migrations manage the schema; its migrations table says which ran",
        );
      }
    } else {
      const reverted = await revertDurableMigrations(
        options,
        parsed.args.bools.has('all') ? Infinity : 1,
        schema,
      );
      out(
        reverted.length
          ? `durable-execution: reverted ${reverted.join(', ')}`
          : 'durable-execution: nothing to revert',
      );
    }
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      err(`nestjs-durable-execution: ${printable(e.message)}\n\n${USAGE}`);
      return 2;
    }
    const name = parsed.command === 'operator' ? parsed.args.positional[0] : parsed.command;
    err(`durable-execution ${name} failed: ${oneLine(e)}`);
    return 1;
  }
}

/** Runs the CLI as the bin does: `argv` without node and the script; the exit code set when it ends. */
export function runCli(argv: string[]): void {
  cli(argv).then(
    (code) => (process.exitCode = code),
    (e) => {
      process.stderr.write(`durable-execution failed: ${oneLine(e)}\n`);
      process.exitCode = 1;
    },
  );
}

if (require.main === module) runCli(process.argv.slice(2));
