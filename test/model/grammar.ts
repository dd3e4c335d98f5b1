/**
 * The grammar of the model's programs beyond straight-line calls: the JavaScript people write around
 * durable calls (issue 19). Each rule is one op kind; its sub-calls are leaves (a step or a command).
 * Ids: a sub-step's op ends with `s` (the checker compares it with its checkpoint), a sub-command's
 * never does, and `<id>@` marks that the rule was entered (coverage).
 */
import fc from 'fast-check';
import type { CmdSpec, Moment, Op, StepKind } from './program';

/** A call inside a rule: a step, or a command (with what the operator answers for it). */
export type Leaf = { c: 'step'; kind: StepKind } | ({ c: 'cmd' } & CmdSpec);

/** How the call a `try` wraps fails. */
export type TryTarget =
  /** A step whose error is retried in-claim until its attempts are spent (a plain Error). */
  | 'step-transient'
  /** A step that throws NonRetryableError with a code: not retried. */
  | 'step-final'
  /** A command whose call throws a 504 before the target applied it (in doubt; lookup: not found). */
  | 'cmd-lost'
  /** A command whose call throws a 504 after the target applied it (in doubt; lookup: found). */
  | 'cmd-applied'
  /** A command the target refuses (NonRetryableError): failed, definite. */
  | 'cmd-refused';

export type RuleOp =
  /** A step returning a map (keys in a generated order) or a list; a step per key / element. */
  | { t: 'loop'; id: string; over: 'keys' | 'elems'; keys: string[]; kind: StepKind }
  /** A branch on a step's recorded result (`result`) or on a recorded value (`value`, ctx.random()). */
  | { t: 'branch'; id: string; on: 'result' | 'value'; then: Leaf; otherwise: Leaf }
  /** `try { <failing call> } catch { <handler> }`. */
  | { t: 'try'; id: string; target: TryTarget; lookup: 'dedup_lookup' | 'plain_lookup'; handler: Leaf }
  /** `Promise.allSettled` / `Promise.race` (then allSettled) over leaves, one of them failing or not. */
  | { t: 'settle'; id: string; mode: 'allSettled' | 'race'; branches: Leaf[]; failing: boolean }
  /** A step called from a command body (a plain call), or a command from a step body (refused). */
  | { t: 'nested'; id: string; how: 'step-in-cmd' | 'cmd-in-step' }
  /** A command whose body draws ctx.uuid() and sends it (the same on every send of its key). */
  | { t: 'cmdvalue'; id: string }
  /** A call made, another awaited, then the first awaited (`const p = a(); await b(); await p`). */
  | { t: 'late'; id: string; kind: StepKind; between: Leaf }
  /** A step never awaited, as the last thing before run() returns (it finishes and is recorded first). */
  | { t: 'dangling'; id: string; kind: StepKind }
  /** Waits in a loop, each with its own signal (or timeout). */
  | { t: 'sigloop'; id: string; n: number; timeoutMs: number | null; signal: Moment | null }
  /** Child runs (issue 21): awaited, fanned out, failing (caught), timed out (caught), or not awaited. */
  | { t: 'child'; id: string; how: ChildHow }
  /**
   * Progress stream entries (issue 22): `ctx.emit` in the body, in a step's body (before and after its
   * work), or two from the body in a `Promise.all` with a step between them.
   */
  | { t: 'emit'; id: string; where: 'body' | 'step' | 'fan' }
  /**
   * A change deployed under runs in flight (issue 22): the code before the deploy calls step `<id>o`;
   * the code after it `if (ctx.patched(id)) <id>n else <id>o` (the case's `deployAt` says when).
   */
  | { t: 'patch'; id: string }
  /**
   * `ctx.continueAsNew` as the program's last op (issue 22's generations): the run's next generation
   * runs `ops` (steps `<id>g<j>s`, commands `<id>g<j>`) with what this one returned so far carried in
   * its input; this generation's checkpoints and commands are deleted.
   */
  | { t: 'continue'; id: string; ops: ContinuedOp[] };

/** What a next generation runs: straight-line steps and commands. */
export type ContinuedOp = Extract<Op, { t: 'step' } | { t: 'cmd' }>;

/** Whether `op` (an observed op id) belongs to the generation a `continue` op `cont` started. */
export const inNextGeneration = (cont: { id: string } | undefined, op: string): boolean =>
  !!cont && op.startsWith(`${cont.id}g`);

/** How a `child` op uses its child run(s). */
export type ChildHow = 'await' | 'fan' | 'fail' | 'timeout' | 'detached';

/** The rule name of an op, for the coverage table (`step`, `cmd`, … for the straight-line ops). */
export function ruleOf(op: { t: string } & Record<string, any>): string {
  switch (op.t) {
    case 'loop':
      return `loop over ${op.over}`;
    case 'branch':
      return `branch on a ${op.on === 'result' ? 'step result' : 'recorded value'}`;
    case 'try':
      return op.target.startsWith('step') ? 'try/catch a failing step' : `try/catch a command (${op.target})`;
    case 'settle':
      return `Promise.${op.mode}`;
    case 'nested':
      return op.how === 'step-in-cmd' ? 'step inside a command body' : 'command inside a step body';
    case 'cmdvalue':
      return 'recorded value in a command body';
    case 'late':
      return 'call awaited later';
    case 'dangling':
      return 'dangling call at return';
    case 'sigloop':
      return 'signals in a loop';
    case 'child':
      return `child run (${op.how})`;
    case 'emit':
      return `ctx.emit (${op.where})`;
    case 'patch':
      return 'ctx.patched (a deploy under runs in flight)';
    case 'continue':
      return 'ctx.continueAsNew (then a next generation)';
    case 'fan':
      return 'Promise.all (step → command)';
    case 'clock':
      return 'recorded values in run()';
    case 'step':
      return op.nul === 'progress' ? 'step with ctx.progress' : 'step';
    case 'cmd':
      return op.approval ? 'command with approval' : 'command';
    default:
      return op.t;
  }
}

/** Every rule the generator writes (the coverage table lists them all, fired or not). */
export const RULES = [
  'step',
  'step with ctx.progress',
  'command',
  'command with approval',
  'Promise.all (step → command)',
  'wait',
  'sleep',
  'recorded values in run()',
  'loop over keys',
  'loop over elems',
  'branch on a step result',
  'branch on a recorded value',
  'try/catch a failing step',
  'try/catch a command (cmd-lost)',
  'try/catch a command (cmd-applied)',
  'try/catch a command (cmd-refused)',
  'Promise.allSettled',
  'Promise.race',
  'step inside a command body',
  'command inside a step body',
  'recorded value in a command body',
  'call awaited later',
  'dangling call at return',
  'signals in a loop',
  'child run (await)',
  'child run (fan)',
  'child run (fail)',
  'child run (timeout)',
  'child run (detached)',
  'ctx.emit (body)',
  'ctx.emit (step)',
  'ctx.emit (fan)',
  'ctx.patched (a deploy under runs in flight)',
  'ctx.continueAsNew (then a next generation)',
  'cleanup after a cancel (onCancel)',
];

/** The engine error a program's run must fail with (the first misuse it reaches), or null. */
export function expectedFailure(ops: Array<{ t: string } & Record<string, any>>): string | null {
  for (const o of ops) {
    if (o.t === 'nested' && o.how === 'cmd-in-step') return 'DURABLE_COMMAND_IN_STEP';
  }
  return null;
}

/** The command specs of a rule op, by their op ids (the operator decides them like any other). */
export function ruleCommands(op: RuleOp): Array<{ op: string; spec: CmdSpec }> {
  const leaf = (l: Leaf, id: string) => (l.c === 'cmd' ? [{ op: id, spec: l }] : []);
  switch (op.t) {
    case 'branch':
      return [...leaf(op.then, `${op.id}t`), ...leaf(op.otherwise, `${op.id}f`)];
    case 'try':
      return leaf(op.handler, `${op.id}h`);
    case 'settle':
      return op.branches.flatMap((b, j) => leaf(b, `${op.id}b${j}`));
    case 'late':
      return leaf(op.between, `${op.id}m`);
    case 'continue':
      return op.ops.flatMap((o) => (o.t === 'cmd' ? [{ op: o.id, spec: o }] : []));
    default:
      return [];
  }
}

/** The waits of a rule op (ids), for their signals. */
export function ruleWaits(op: RuleOp): string[] {
  return op.t === 'sigloop' ? Array.from({ length: op.n }, (_, i) => `${op.id}w${i}`) : [];
}

const stepKind = fc.constantFrom<StepKind>('compute', 'model', 'tool');
/** Commands in rules: no approvals (those are the straight-line ops' part), deduplicating or not. */
const quietCmd: fc.Arbitrary<CmdSpec> = fc.record({
  cmd: fc.constantFrom(
    'dedup_lookup',
    'dedup_retry',
    'plain_lookup',
    'dedup_manual',
    'plain_manual',
  ) as fc.Arbitrary<CmdSpec['cmd']>,
  approval: fc.constant(false),
  decision: fc.constant<'approve'>('approve'),
  resolution: fc.constantFrom<'retry' | 'failed'>('retry', 'failed'),
  keyed: fc.boolean(),
});
const leafArb: fc.Arbitrary<Leaf> = fc.oneof(
  stepKind.map((kind) => ({ c: 'step' as const, kind })),
  quietCmd.map((spec) => ({ c: 'cmd' as const, ...spec })),
);
/** Keys people and models use: index-like ones (JavaScript puts them first), short, long, unicode. */
const keyArb = fc.constantFrom('second', 'first', 'b', 'a', '10', '2', 'zz', 'é', 'tool_call_1');

/** A rule op before it gets its id. */
export const ruleShape: fc.Arbitrary<{ t: RuleOp['t'] } & Record<string, any>> = fc.oneof(
  {
    arbitrary: fc.record({
      t: fc.constant('loop' as const),
      over: fc.constantFrom<'keys' | 'elems'>('keys', 'keys', 'elems'),
      keys: fc.uniqueArray(keyArb, { minLength: 1, maxLength: 4 }),
      kind: stepKind,
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      t: fc.constant('branch' as const),
      on: fc.constantFrom<'result' | 'value'>('result', 'value'),
      then: leafArb,
      otherwise: leafArb,
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      t: fc.constant('try' as const),
      target: fc.constantFrom<TryTarget>(
        'step-transient',
        'step-final',
        'cmd-lost',
        'cmd-applied',
        'cmd-refused',
      ),
      lookup: fc.constantFrom<'dedup_lookup' | 'plain_lookup'>('dedup_lookup', 'plain_lookup'),
      handler: leafArb,
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      t: fc.constant('settle' as const),
      mode: fc.constantFrom<'allSettled' | 'race'>('allSettled', 'race'),
      branches: fc.array(leafArb, { minLength: 2, maxLength: 3 }),
      failing: fc.boolean(),
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      t: fc.constant('nested' as const),
      how: fc.constantFrom<'step-in-cmd' | 'cmd-in-step'>(
        'step-in-cmd',
        'step-in-cmd',
        'step-in-cmd',
        'cmd-in-step',
      ),
    }),
    weight: 1,
  },
  { arbitrary: fc.constant({ t: 'cmdvalue' as const }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('late' as const), kind: stepKind, between: leafArb }), weight: 2 },
  {
    arbitrary: fc.record({
      t: fc.constant('sigloop' as const),
      n: fc.integer({ min: 1, max: 3 }),
      timeoutMs: fc.option(fc.constantFrom(20, 150)),
      signal: fc.option(
        fc.oneof(
          fc.constant({ at: 'start' as const }),
          fc.integer({ min: 0, max: 40 }).map((n) => ({ at: 'round' as const, n })),
        ),
      ),
    }),
    weight: 1,
  },
  {
    arbitrary: fc.record({
      t: fc.constant('emit' as const),
      where: fc.constantFrom<'body' | 'step' | 'fan'>('body', 'step', 'fan'),
    }),
    weight: 2,
  },
  { arbitrary: fc.constant({ t: 'patch' as const }), weight: 2 },
);

/** A child op (issue 21), weighted like the other rules. */
export const childShape = fc.record({
  t: fc.constant('child' as const),
  how: fc.constantFrom<ChildHow>('await', 'await', 'fan', 'fail', 'timeout', 'detached'),
});

/** The dangling call, generated only as a program's last op. */
export const danglingShape = stepKind.map((kind) => ({ t: 'dangling' as const, kind }));

/** A `continue` op (its id and its ops' ids come with the program's labels). */
export const continueShape = fc
  .array(leafArb, { minLength: 1, maxLength: 3 })
  .map((leaves) => ({ t: 'continue' as const, leaves }));
