/**
 * What a case is: programs for the model workflow (its run input), outside actions at generated
 * moments, and faults at pause points. All plain JSON, generated and shrunk by fast-check.
 */
import fc from 'fast-check';

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
}

export type Op =
  | { t: 'step'; id: string; kind: StepKind; nul: boolean }
  | ({ t: 'cmd'; id: string } & CmdSpec)
  | { t: 'fan'; id: string; branches: ({ id: string; kind: StepKind } & CmdSpec)[] }
  | { t: 'wait'; id: string; timeoutMs: number | null }
  | { t: 'sleep'; id: string; ms: number }
  | { t: 'clock'; id: string };

export interface Program {
  ops: Op[];
}

/** When an outside action is applied: right after start, after n driver rounds, or during a hold. */
export type Moment = { at: 'start' } | { at: 'round'; n: number } | { at: 'hold'; fault: number };

export type Action =
  | { a: 'signal'; wait: string }
  | { a: 'cancel' }
  /** The operator acts on every command of the run awaiting approval or in doubt, right now. */
  | { a: 'decide' }
  /** The operator re-drives the run if it is failed or dead-lettered. */
  | { a: 'retry' };

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
  'before-write:tool.command_reserved',
  'after-write:tool.command_reserved',
  'before-write:consume-signal',
  'after-write:consume-signal',
  'before-write:park',
  'after-write:park',
  'before-write:run.checkpoint_saved',
  'after-write:run.checkpoint_saved',
  'after-write:',
] as const;

export interface Fault {
  /** `<point>[:<detail prefix>]` (see PAUSES). */
  where: (typeof PAUSES)[number];
  /** Fires at the nth hit of a matching pause point in the case. */
  nth: number;
  /** hold: the run waits while its `during` actions are applied; zombie: frozen past its lease and
   *  woken later; crash: frozen forever, its worker discarded. */
  kind: 'hold' | 'zombie' | 'crash';
  /** When a zombie wakes: at the takeover claim, or once every run has settled. */
  release: 'takeover' | 'settled';
}

export interface Case {
  programs: Program[];
  actions: ScheduledAction[];
  faults: Fault[];
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
});

/** An op before it gets its id. */
type OpShape = { t: Op['t'] } & Record<string, any>;

const opShape: fc.Arbitrary<OpShape> = fc.oneof(
  { arbitrary: fc.record({ t: fc.constant('step' as const), kind: stepKind, nul: fc.boolean() }), weight: 3 },
  { arbitrary: cmdSpec.map((c) => ({ t: 'cmd' as const, ...c })), weight: 3 },
  {
    arbitrary: fc
      .array(fc.record({ kind: stepKind, spec: cmdSpec }), { minLength: 2, maxLength: 3 })
      .map((bs) => ({ t: 'fan' as const, branches: bs.map((b) => ({ kind: b.kind, ...b.spec })) })),
    weight: 3,
  },
  {
    arbitrary: fc.record({ t: fc.constant('wait' as const), timeoutMs: fc.option(fc.constantFrom(20, 150)) }),
    weight: 3,
  },
  { arbitrary: fc.record({ t: fc.constant('sleep' as const), ms: fc.constantFrom(0, 10, 40) }), weight: 1 },
  { arbitrary: fc.constant({ t: 'clock' as const }), weight: 2 },
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
    return { ...s, id } as Op;
  });
  return { ops };
}

export const programArb: fc.Arbitrary<Program> = fc
  .array(opShape, { minLength: 1, maxLength: 7 })
  .map((shapes) => label(shapes));

const momentArb = (faults: number): fc.Arbitrary<Moment> =>
  fc.oneof(
    fc.constant({ at: 'start' as const }),
    fc.integer({ min: 0, max: 40 }).map((n) => ({ at: 'round' as const, n })),
    ...(faults ? [fc.nat(faults - 1).map((fault) => ({ at: 'hold' as const, fault }))] : []),
  );

const faultArb: fc.Arbitrary<Fault> = fc.record({
  where: fc.constantFrom(...PAUSES),
  nth: fc.nat(3),
  kind: fc.constantFrom<Fault['kind']>('hold', 'hold', 'zombie', 'zombie', 'crash'),
  release: fc.constantFrom<Fault['release']>('takeover', 'settled'),
});

/** Every wait without a timeout gets a signal (else the run would rightly wait forever). */
function requiredSignals(programs: Program[], faults: number): fc.Arbitrary<ScheduledAction[]> {
  const waits = programs.flatMap((p, run) =>
    p.ops.filter((o) => o.t === 'wait' && o.timeoutMs === null).map((o) => ({ run, wait: o.id })),
  );
  return fc.tuple(...waits.map(() => momentArb(faults))).map((moments) =>
    waits.map((w, i) => ({
      run: w.run,
      action: { a: 'signal' as const, wait: w.wait },
      moment: moments[i],
    })),
  );
}

function extraActions(programs: Program[], faults: number): fc.Arbitrary<ScheduledAction[]> {
  const run = fc.nat(programs.length - 1);
  const waitsOf = (r: number) => programs[r].ops.filter((o) => o.t === 'wait').map((o) => o.id);
  const action = run.chain((r) => {
    const waits = waitsOf(r);
    const kinds: fc.Arbitrary<Action>[] = [
      fc.constant({ a: 'cancel' as const }),
      fc.constant({ a: 'decide' as const }),
      fc.constant({ a: 'retry' as const }),
    ];
    if (waits.length) kinds.push(fc.constantFrom(...waits).map((wait) => ({ a: 'signal' as const, wait })));
    return fc.record({ run: fc.constant(r), action: fc.oneof(...kinds), moment: momentArb(faults) });
  });
  return fc.array(action, { maxLength: 3 });
}

export const caseArb: fc.Arbitrary<Case> = fc
  .record({
    programs: fc.array(programArb, { minLength: 1, maxLength: 2 }),
    faults: fc.array(faultArb, { maxLength: 3 }),
  })
  .chain(({ programs, faults }) =>
    fc
      .tuple(requiredSignals(programs, faults.length), extraActions(programs, faults.length))
      .map(([req, extra]) => ({ programs, faults, actions: [...req, ...extra] })),
  );
