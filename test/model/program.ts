/**
 * What a case is: programs for the model workflow (its run input), outside actions at generated
 * moments, and faults at pause points. All plain JSON, generated and shrunk by fast-check.
 */
import fc from 'fast-check';
import { childShape, continueShape, danglingShape, Leaf, RuleOp, ruleShape, ruleWaits } from './grammar';

export type StepKind = 'compute' | 'model' | 'tool';
/** The command methods of the model: target (dedup / plain) × in-doubt policy. */
export type CmdName = 'dedup_lookup' | 'dedup_retry' | 'dedup_manual' | 'plain_lookup' | 'plain_manual';
export const CMD_NAMES: CmdName[] = [
  'dedup_lookup',
  'dedup_retry',
  'dedup_manual',
  'plain_lookup',
  'plain_manual',
];

export interface CmdSpec {
  cmd: CmdName;
  approval: boolean;
  /** The operator's answer when the command awaits approval. */
  decision: 'approve' | 'reject';
  /** The operator's answer to a manual in-doubt command the target never saw. */
  resolution: 'retry' | 'failed';
  /** Keyed by its op id (`key` option), not by its position in the run. */
  keyed?: boolean;
}

export type Op =
  /** nul: a NUL character in the step's result, or in the partial it reports with ctx.progress. */
  | { t: 'step'; id: string; kind: StepKind; nul: 'none' | 'result' | 'progress' }
  | ({ t: 'cmd'; id: string } & CmdSpec)
  | { t: 'fan'; id: string; branches: ({ id: string; kind: StepKind } & CmdSpec)[] }
  | { t: 'wait'; id: string; timeoutMs: number | null; signal: Moment | null }
  | { t: 'sleep'; id: string; ms: number }
  | { t: 'clock'; id: string }
  | RuleOp;

export interface Program {
  ops: Op[];
  /** In a case with limits: the run's concurrency key (the limited kind allows one run per key). */
  key?: string;
  /** In a next generation (`continue`): what the generations before it returned. */
  carried?: Record<string, unknown>;
}

/** When an outside action is applied: right after start, after n driver rounds, or during a hold. */
export type Moment = { at: 'start' } | { at: 'round'; n: number } | { at: 'hold'; fault: number };

export type Action =
  | { a: 'signal'; wait: string }
  | { a: 'cancel' }
  /** The operator acts on every command of the run awaiting approval or in doubt, right now. */
  | { a: 'decide' }
  /** The operator re-drives the run if it is failed or dead-lettered. */
  | { a: 'retry' }
  /**
   * An orchestrator reports the worker holding the run gone (`LeaseService.releaseWorker`) while that
   * worker is alive (during a hold: with a call in flight): every run it holds is handed on.
   */
  | { a: 'release' };

export interface ScheduledAction {
  run: number;
  action: Action;
  moment: Moment;
}

export const PAUSES = [
  'after-claim',
  'before-call:step:',
  'before-call:command:',
  'before-call:lookup:',
  // Inside a command body, past the engine's last lease check, before its request leaves (a zombie
  // woken here must be refused at the socket by the fenced transport).
  'in-body:command:',
  'before-write:tool.command_reserved',
  'after-write:tool.command_reserved',
  'before-write:consume-signal',
  'after-write:consume-signal',
  'before-write:park',
  'after-write:park',
  'before-write:run.checkpoint_saved',
  'after-write:run.checkpoint_saved',
  // A child started, the parent not yet waiting for it (a kill here must not start it twice).
  'after-write:child.started',
  // A pod read a due schedule and is about to fire it (frozen: another pod fires the tick meanwhile).
  'before-write:schedule.fire',
  'after-write:',
] as const;

export interface Fault {
  /** `<point>[:<detail prefix>]` (see PAUSES). */
  where: (typeof PAUSES)[number];
  /** Fires at the nth hit of a matching pause point in the case. */
  nth: number;
  /** hold: the run waits while its `during` actions are applied; zombie: frozen past its lease and
   *  woken later; crash: frozen forever, its worker discarded; deaf: frozen, its worker stops
   *  heartbeating but goes on claiming (it may claim the same run again) until the takeover; drain:
   *  the worker is shut down gracefully (SIGTERM) while this call is held in flight for holdMs;
   *  failover: the run's row moves to an older WAL timeline, what a promotion leaves behind (this
   *  claim's writes and heartbeats fail from then on, the worker goes on; the reconciler hands the run
   *  on and its next claim settles each command without a row by policy before a first send). Only the
   *  marker is simulated: no commit is lost; lost-suffix: a real asynchronous failover (cases generated
   *  with `lostSuffix`, on a primary and a standby of their own): replication pauses here, the primary
   *  commits for holdMs more, stops, the standby is promoted without those commits and the workers
   *  move to it; the run goes on meanwhile. */
  kind: 'hold' | 'zombie' | 'crash' | 'deaf' | 'drain' | 'failover' | 'lost-suffix';
  /** How long a hold lasts (a long one outlives the lease unless the worker heartbeats it); for a
   *  lost-suffix fault, how long the primary commits after replication paused. */
  holdMs: number;
  /** When a zombie wakes: at the takeover claim, or once every run has settled. */
  release: 'takeover' | 'settled';
}

export interface Case {
  programs: Program[];
  actions: ScheduledAction[];
  faults: Fault[];
  /** The runs are of the kind with concurrency limits (MODEL_LIMITS), each with its `key`. */
  limited?: boolean;
  /** With `limited`: the kind keeps its slots while its runs wait (`holdSlotWhileWaiting`). */
  hold?: boolean;
  /**
   * When the code with `ctx.patched` is deployed (World.deployed): after this many driver rounds; null:
   * never. Only cases with a `patch` op.
   */
  deployAt?: number | null;
  /** Program #0 is started by a per-second durable schedule, a run per tick (test/model/schedule-case.ts). */
  scheduled?: { overlap: 'allow' | 'skip' | 'queue' };
  /** false: the workers run with the fenced transport off (a hand-built case's power check). */
  fencedTransport?: boolean;
}

const stepKind = fc.constantFrom<StepKind>('compute', 'model', 'tool');
const cmdSpec: fc.Arbitrary<CmdSpec> = fc.record({
  cmd: fc.constantFrom(...CMD_NAMES),
  approval: fc.oneof(
    { arbitrary: fc.constant(false), weight: 3 },
    { arbitrary: fc.constant(true), weight: 1 },
  ),
  decision: fc.constantFrom<'approve' | 'reject'>('approve', 'reject'),
  resolution: fc.constantFrom<'retry' | 'failed'>('retry', 'failed'),
  keyed: fc.boolean(),
});

/** A hold refers to a fault by number; one that does not exist applies when the case rests. */
const momentArb: fc.Arbitrary<Moment> = fc.oneof(
  fc.constant({ at: 'start' as const }),
  fc.integer({ min: 0, max: 40 }).map((n) => ({ at: 'round' as const, n })),
  fc.nat(2).map((fault) => ({ at: 'hold' as const, fault })),
);

/** An op before it gets its id. */
type OpShape = { t: Op['t'] } & Record<string, any>;

const opShape: fc.Arbitrary<OpShape> = fc.oneof(
  {
    arbitrary: fc.record({
      t: fc.constant('step' as const),
      kind: stepKind,
      nul: fc.constantFrom<'none' | 'result' | 'progress'>('none', 'none', 'none', 'result', 'progress'),
    }),
    weight: 3,
  },
  { arbitrary: cmdSpec.map((c) => ({ t: 'cmd' as const, ...c })), weight: 3 },
  {
    arbitrary: fc
      .array(fc.record({ kind: stepKind, spec: cmdSpec }), { minLength: 2, maxLength: 3 })
      .map((bs) => ({ t: 'fan' as const, branches: bs.map((b) => ({ kind: b.kind, ...b.spec })) })),
    weight: 3,
  },
  {
    // The signal a wait gets (when), part of the op so that shrinking never orphans it.
    arbitrary: fc.record({
      t: fc.constant('wait' as const),
      timeoutMs: fc.option(fc.constantFrom(20, 150)),
      signal: fc.option(momentArb),
    }),
    weight: 3,
  },
  { arbitrary: fc.record({ t: fc.constant('sleep' as const), ms: fc.constantFrom(0, 10, 40) }), weight: 1 },
  { arbitrary: fc.constant({ t: 'clock' as const }), weight: 2 },
  // The grammar of issue 19: loops, branches, try/catch, allSettled/race, nesting, late awaits, …
  { arbitrary: ruleShape, weight: 12 },
  // Child runs: started once, awaited durably, their ends and their parent's reaching each other
  // (DURABLE_MODEL_CHILDREN=1: mostly children, hunting a defect of theirs).
  { arbitrary: childShape, weight: process.env.DURABLE_MODEL_CHILDREN === '1' ? 30 : 2 },
);

/** Gives every op (and fan-out branch) an id unique in its program. */
function label(shapes: OpShape[]): Program {
  const ops = shapes.map((s, i) => {
    const id = `o${i}`;
    if (s.t === 'fan')
      return {
        ...s,
        id,
        branches: s.branches.map((b: object, j: number) => ({ ...b, id: `${id}b${j}` })),
      } as Op;
    if (s.t === 'continue') {
      // Each generation of an agent loop makes the calls the one before made: the next generation
      // starts with the program's leading steps and commands (their positions, kinds and names).
      const same: Leaf[] = [];
      for (const x of shapes) {
        if (same.length === 3 || (x.t !== 'step' && x.t !== 'cmd')) break;
        const { t: _t, nul: _nul, ...spec } = x;
        same.push(x.t === 'step' ? { c: 'step', kind: x.kind } : ({ c: 'cmd', ...spec } as Leaf));
      }
      const ops = (same.length ? same : (s.leaves as Leaf[])).map((l, j) => {
        if (l.c === 'step') return { t: 'step', id: `${id}g${j}s`, kind: l.kind, nul: 'none' };
        const { c: _c, ...spec } = l;
        return { ...spec, t: 'cmd', id: `${id}g${j}` };
      });
      return { t: 'continue', id, ops } as Op;
    }
    return { ...s, id } as Op;
  });
  return { ops };
}

export const programArb: fc.Arbitrary<Program> = fc
  .record({
    shapes: fc.array(opShape, { minLength: 1, maxLength: 7 }),
    // Now and then, as the last thing run() does: a call left dangling (the run fails with a usage
    // error), or the run continued as new (its next generation runs a few more calls).
    last: fc.oneof(
      { arbitrary: fc.constant(null), weight: 12 },
      { arbitrary: danglingShape, weight: 1 },
      { arbitrary: continueShape, weight: 2 },
    ),
  })
  .map(({ shapes, last }) => label(last ? [...shapes, last] : shapes));

/** Every pause point, the ones between a write and its use (or a call) twice as often. */
const WHERE = [
  ...PAUSES,
  'after-write:tool.command_reserved',
  'before-call:command:',
  'before-call:step:',
  'in-body:command:',
  'after-write:consume-signal',
  'before-write:park',
] as const;

const faultArb: fc.Arbitrary<Fault> = fc.record({
  where: fc.constantFrom(...WHERE),
  nth: fc.nat(2),
  kind: fc.constantFrom<Fault['kind']>(
    'hold',
    'hold',
    'zombie',
    'zombie',
    'crash',
    'deaf',
    'drain',
    'failover',
  ),
  holdMs: fc.constantFrom(10, 10, 600),
  release: fc.constantFrom<Fault['release']>('takeover', 'settled'),
});

const extraArb = fc.record({
  run: fc.nat(1),
  action: fc.constantFrom<Action['a']>('cancel', 'decide', 'retry', 'signal', 'release'),
  wait: fc.nat(6),
  moment: momentArb,
});

/** Every wait's own signal (always one for a wait without a timeout), then the extra actions. */
function toCase(
  programs: Program[],
  faults: Fault[],
  extra: { run: number; action: Action['a']; wait: number; moment: Moment }[],
): Case {
  const actions: ScheduledAction[] = [];
  programs.forEach((p, run) => {
    for (const o of p.ops) {
      if (o.t === 'wait' && (o.signal || o.timeoutMs === null))
        actions.push({ run, action: { a: 'signal', wait: o.id }, moment: o.signal ?? { at: 'start' } });
      if (o.t === 'sigloop' && (o.signal || o.timeoutMs === null))
        for (const wait of ruleWaits(o))
          actions.push({ run, action: { a: 'signal', wait }, moment: o.signal ?? { at: 'start' } });
    }
  });
  for (const x of extra) {
    const run = x.run % programs.length;
    const waits = programs[run].ops.filter((o) => o.t === 'wait');
    const holds = faults.flatMap((f, i) => (f.kind === 'hold' ? [i] : []));
    if (x.action === 'release' && holds.length)
      // Released while it holds the run mid-call: the race the action exists for.
      actions.push({
        run,
        action: { a: x.action },
        moment: { at: 'hold', fault: holds[x.wait % holds.length] },
      });
    else if (x.action !== 'signal') actions.push({ run, action: { a: x.action }, moment: x.moment });
    else if (waits.length)
      actions.push({ run, action: { a: 'signal', wait: waits[x.wait % waits.length].id }, moment: x.moment });
  }
  return { programs, faults, actions };
}

/** One case in four has limits: up to 3 runs of the limited kind, each with a key of three. */
const limitsArb = fc.oneof(
  // DURABLE_MODEL_LIMITED=1: every case (hunting a defect of the limits).
  { arbitrary: fc.constant(null), weight: process.env.DURABLE_MODEL_LIMITED === '1' ? 0 : 3 },
  {
    arbitrary: fc.record({
      keys: fc.array(fc.constantFrom('a', 'b', 'c'), { minLength: 3, maxLength: 3 }),
      hold: fc.boolean(),
    }),
    weight: 1,
  },
);

/** One case in six without limits starts its first program by a schedule (DURABLE_MODEL_SCHEDULES=1: every one). */
const scheduledArb = fc.oneof(
  { arbitrary: fc.constant(null), weight: process.env.DURABLE_MODEL_SCHEDULES === '1' ? 0 : 5 },
  { arbitrary: fc.constantFrom<'allow' | 'skip' | 'queue'>('allow', 'skip', 'queue'), weight: 1 },
);

/** A real lost WAL suffix: where replication pauses, and how long the primary then commits alone. */
const lostSuffixArb: fc.Arbitrary<Fault> = fc.record({
  where: fc.constantFrom(
    'after-claim',
    'after-claim',
    'before-call:step:',
    'before-call:step:',
    'before-call:command:',
    'after-write:tool.command_reserved',
    'after-write:run.checkpoint_saved',
    'after-write:park',
    'after-write:consume-signal',
  ),
  nth: fc.nat(1),
  kind: fc.constant('lost-suffix' as const),
  holdMs: fc.constantFrom(20, 150, 500),
  release: fc.constant('settled' as const),
});

/**
 * Cases; `lostSuffix`: each with a real lost WAL suffix first (and up to two other faults). A tick fired
 * on the lost suffix fires again on the new primary: its run has the same id (made from the tick), so
 * it stays the case's run, and it looks its commands up before sending them.
 */
export function caseArbitrary(lostSuffix = false): fc.Arbitrary<Case> {
  return fc
    .record({
      programs: fc.array(programArb, { minLength: 1, maxLength: 3 }),
      faults: lostSuffix
        ? fc.tuple(lostSuffixArb, fc.array(faultArb, { maxLength: 2 })).map(([l, f]) => [l, ...f])
        : fc.array(faultArb, { maxLength: 3 }),
      extra: fc.array(extraArb, { maxLength: 3 }),
      limits: limitsArb,
      overlap: scheduledArb,
      deployAt: fc.option(fc.integer({ min: 0, max: 30 }), { freq: 4 }),
    })
    .map(({ deployAt, ...rest }) => {
      const c = caseOf(rest);
      return c.programs.some((p) => p.ops.some((o) => o.t === 'patch')) ? { ...c, deployAt } : c;
    });
}

function caseOf({
  programs,
  faults,
  extra,
  limits,
  overlap,
}: {
  programs: Program[];
  faults: Fault[];
  extra: { run: number; action: Action['a']; wait: number; moment: Moment }[];
  limits: { keys: string[]; hold: boolean } | null;
  overlap: 'allow' | 'skip' | 'queue' | null;
}): Case {
  return limits
    ? {
        ...toCase(
          programs.map((p, i) => ({ ...p, key: limits.keys[i] })),
          faults,
          extra,
        ),
        limited: true,
        ...(limits.hold ? { hold: true } : {}),
      }
    : {
        ...toCase(programs.slice(0, 2), faults, extra),
        ...(overlap ? { scheduled: { overlap } } : {}),
      };
}
