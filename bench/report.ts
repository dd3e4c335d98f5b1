import { pairRatios, spread, Spread } from './stats';

/** One measured figure: one value per repeat. */
export interface FigureDef {
  key: string;
  label: string;
  unit: 'ms' | 'stmt/s' | 'steps/s' | 'runs/s' | 'tx/s' | 'count' | 'bytes' | 'µs';
  section: string;
}

/**
 * A ratio of two figures, computed per repeat (both measured in the same repeat, side by side), or,
 * when the bench recorded it per round of blocks (`Report.pair`), per round: the finer one wins.
 */
export interface RatioDef {
  key: string;
  label: string;
  num: string;
  den: string;
  target?: { op: '<=' | '>='; value: number };
}

const RAW = '1. Raw limit: hand-written node-postgres, one dedicated connection per worker, prepared';
const ENGINE = '2. Engine: DurableExecutionModule, compute steps, driven by DurableWorker.tick()';
const COUNT = '3. Per step: statements, commits (WAL), WAL volume, client CPU';
const TX = '4. A durable transaction (@DurableTransaction, one INSERT) against a plain one, sequential';

/** Rows of one section of the table: [key, unit, label]. */
function section(name: string, rows: Array<[string, FigureDef['unit'], string]>): FigureDef[] {
  return rows.map(([key, unit, label]) => ({ section: name, key, unit, label }));
}

export const FIGURES: FigureDef[] = [
  ...section(RAW, [
    ['raw.stepWrite.seq.p50', 'ms', '1a STEP_WRITE_SQL by hand, sequential, p50'],
    ['raw.stepWrite.seq.p99', 'ms', '1a STEP_WRITE_SQL by hand, sequential, p99'],
    ['raw.update.seq.p50', 'ms', '1b fenced UPDATE, sequential, p50'],
    ['raw.update.seq.p99', 'ms', '1b fenced UPDATE, sequential, p99'],
    ['raw.update.c16.perSec', 'stmt/s', '1b fenced UPDATE, 16 connections'],
    ['raw.update.c16.p50', 'ms', '1b fenced UPDATE, 16 connections, p50'],
    ['raw.stepWrite.c16.perSec', 'stmt/s', '1a STEP_WRITE_SQL by hand, 16 connections'],
    ['raw.stepWrite.c16.p50', 'ms', '1a STEP_WRITE_SQL by hand, 16 connections, p50'],
    ['raw.run3.c16.perSec', 'runs/s', '1c claim+3 step writes+finish, 16 in flight'],
    ['raw.run3.c16.wallPerSec', 'runs/s', '1c   same, wall clock incl. ramp and tail'],
    ['raw.start.seq.perSec', 'runs/s', '   START_RUN_SQL by hand, 1 connection'],
    ['raw.start.c16.perSec', 'runs/s', '   START_RUN_SQL by hand, 16 connections'],
  ]),
  ...section(ENGINE, [
    ['engine.step.seq.p50', 'ms', 'step commit (step call), sequential, p50'],
    ['engine.step.seq.p99', 'ms', 'step commit (step call), sequential, p99'],
    ['engine.writeStep.seq.p50', 'ms', 'RunStateStore.writeStep, sequential, p50'],
    ['engine.writeStep.seq.p99', 'ms', 'RunStateStore.writeStep, sequential, p99'],
    ['engine.steps.c16.perSec', 'steps/s', 'steps/s, 10-step runs, 16 in flight'],
    ['engine.steps.c16.alone.perSec', 'steps/s', '  same, group commit off (worker.groupCommit 0)'],
    ['engine.runs10.c16.perSec', 'runs/s', '10-step runs/s, 16 in flight'],
    ['engine.runs10.c16.wallPerSec', 'runs/s', '  same, wall clock incl. ramp and tail'],
    ['engine.run3.c16.perSec', 'runs/s', '3-step runs/s, 16 in flight'],
    ['engine.run3.c16.wallPerSec', 'runs/s', '  same, wall clock incl. ramp and tail'],
    ['engine.start.seq.perSec', 'runs/s', 'RunRepository.start, 1 caller'],
    ['engine.start.c16.perSec', 'runs/s', 'RunRepository.start, 16 callers'],
  ]),
  ...section(COUNT, [
    ['engine.statementsPerStep', 'count', 'statements per step commit (client, mean)'],
    ['engine.statementsPerStep.max', 'count', 'statements in the busiest step (client)'],
    ['engine.commitsPerStep', 'count', 'commits per step (server WAL, steps only)'],
    ['raw.stepWrite.commits', 'count', '1a commits per STEP_WRITE_SQL (server WAL)'],
    ['raw.update.walBytes', 'bytes', '1b WAL per fenced UPDATE'],
    ['raw.stepWrite.walBytes', 'bytes', '1a WAL per STEP_WRITE_SQL'],
    ['engine.walBytesPerStep', 'bytes', 'WAL per engine step (sequential)'],
    ['raw.update.nonHot', 'count', '1b non-HOT ai_runs updates per fenced UPDATE'],
    ['raw.stepWrite.nonHot', 'count', '1a non-HOT ai_runs updates per STEP_WRITE_SQL'],
    ['engine.nonHotPerStep', 'count', 'non-HOT ai_runs updates per engine step'],
    ['raw.update.indexInserts', 'count', '1b index inserts per fenced UPDATE'],
    ['raw.stepWrite.indexInserts', 'count', '1a index inserts per STEP_WRITE_SQL'],
    ['engine.indexInsertsPerStep', 'count', 'index inserts per engine step'],
    ['raw.update.c16.cpuUs', 'µs', '1b client CPU per fenced UPDATE @16'],
    ['raw.stepWrite.c16.cpuUs', 'µs', '1a client CPU per STEP_WRITE_SQL @16'],
    ['engine.steps.c16.cpuUs', 'µs', 'client CPU per engine step @16 (10-step runs)'],
    ['engine.steps.c16.alone.cpuUs', 'µs', '  same, group commit off'],
    ['raw.run3.cpuUs', 'µs', '1c client CPU per raw 3-step run'],
    ['engine.run3.cpuUs', 'µs', 'client CPU per engine 3-step run'],
  ]),
  ...section(TX, [
    ['raw.tx.seq.p50', 'ms', 'plain BEGIN; INSERT; COMMIT, p50'],
    ['raw.tx.seq.p99', 'ms', 'plain BEGIN; INSERT; COMMIT, p99'],
    ['raw.tx.seq.perSec', 'tx/s', 'plain transactions/s, one connection'],
    ['engine.tx.seq.p50', 'ms', 'durable transaction (the call), p50'],
    ['engine.tx.seq.p99', 'ms', 'durable transaction (the call), p99'],
    ['engine.tx.seq.perSec', 'tx/s', 'durable transaction commits/s, one run'],
    ['engine.tx.roundTrips', 'count', 'round trips per durable transaction (mean)'],
    ['engine.tx.roundTrips.max', 'count', 'round trips in the busiest durable transaction'],
    ['engine.tx.commitsPerStep', 'count', 'commits per durable transaction (server WAL)'],
    ['raw.tx.commits', 'count', 'commits per plain transaction (server WAL)'],
    ['engine.tx.walBytes', 'bytes', 'WAL per durable transaction'],
    ['raw.tx.walBytes', 'bytes', 'WAL per plain transaction'],
  ]),
];

export const RATIOS: RatioDef[] = [
  {
    key: 'stepLatency',
    label: 'engine step-commit p50 / raw fenced UPDATE p50',
    num: 'engine.step.seq.p50',
    den: 'raw.update.seq.p50',
    target: { op: '<=', value: 1.2 },
  },
  {
    key: 'stepThroughput',
    label: 'engine steps/s @16 / raw fenced UPDATE/s @16',
    num: 'engine.steps.c16.perSec',
    den: 'raw.update.c16.perSec',
    target: { op: '>=', value: 0.8 },
  },
  {
    key: 'run3Throughput',
    label: 'engine 3-step runs/s / raw 3-step loop runs/s',
    num: 'engine.run3.c16.perSec',
    den: 'raw.run3.c16.perSec',
    target: { op: '>=', value: 0.8 },
  },
  {
    key: 'writeStepLatency',
    label: '  engine writeStep p50 / raw fenced UPDATE p50',
    num: 'engine.writeStep.seq.p50',
    den: 'raw.update.seq.p50',
  },
  {
    key: 'sqlShapeLatency',
    label: '  raw STEP_WRITE_SQL p50 / raw fenced UPDATE p50',
    num: 'raw.stepWrite.seq.p50',
    den: 'raw.update.seq.p50',
  },
  {
    key: 'engineOverLatency',
    label: '  engine step-commit p50 / raw STEP_WRITE_SQL p50',
    num: 'engine.step.seq.p50',
    den: 'raw.stepWrite.seq.p50',
  },
  {
    key: 'sqlShapeThroughput',
    label: '  raw STEP_WRITE_SQL/s @16 / raw fenced UPDATE/s @16',
    num: 'raw.stepWrite.c16.perSec',
    den: 'raw.update.c16.perSec',
  },
  {
    key: 'groupCommit',
    label: '  engine steps/s @16: group commit on / off',
    num: 'engine.steps.c16.perSec',
    den: 'engine.steps.c16.alone.perSec',
  },
  {
    key: 'engineOverThroughput',
    label: '  engine steps/s @16 / raw STEP_WRITE_SQL/s @16',
    num: 'engine.steps.c16.perSec',
    den: 'raw.stepWrite.c16.perSec',
  },
  {
    key: 'startThroughput',
    label: '  engine start/s @16 / raw START_RUN_SQL/s @16',
    num: 'engine.start.c16.perSec',
    den: 'raw.start.c16.perSec',
  },
  {
    key: 'txLatency',
    label: 'durable transaction p50 / plain transaction p50',
    num: 'engine.tx.seq.p50',
    den: 'raw.tx.seq.p50',
  },
  {
    key: 'txThroughput',
    label: '  durable transactions/s / plain transactions/s',
    num: 'engine.tx.seq.perSec',
    den: 'raw.tx.seq.perSec',
  },
];

/** Collects one value per figure per repeat, plus free-form details per repeat. */
export class Report {
  readonly values = new Map<string, number[]>();
  readonly details: Array<Record<string, unknown>> = [];
  /** Ratios taken per round of blocks (all repeats together), by ratio key. */
  readonly pairs = new Map<string, number[]>();

  constructor(
    readonly figures: FigureDef[],
    readonly ratios: RatioDef[],
  ) {}

  add(key: string, repeat: number, value: number): void {
    if (!this.figures.some((f) => f.key === key)) throw new Error(`unknown figure ${key}`);
    const arr = this.values.get(key) ?? [];
    arr[repeat] = value;
    this.values.set(key, arr);
  }

  detail(repeat: number, name: string, value: unknown): void {
    this.details[repeat] = { ...this.details[repeat], [name]: value };
  }

  /** One value of ratio `key` from one round of neighbouring blocks. */
  pair(key: string, value: number): void {
    if (!this.ratios.some((r) => r.key === key)) throw new Error(`unknown ratio ${key}`);
    this.pairs.set(key, [...(this.pairs.get(key) ?? []), value]);
  }
}

export interface FigureResult extends Spread, FigureDef {}
export interface RatioResult extends Spread, RatioDef {
  /** Whether the median meets the target (absent when the ratio has none). */
  meetsTarget?: boolean;
  /** What one sample is: a round of blocks or a repeat. */
  per: 'round' | 'repeat';
}

/** A figure that must have exactly one value in every repeat. */
export interface CheckResult {
  label: string;
  key: string;
  expected: number;
  samples: number[];
  ok: boolean;
}

/** Figures that are invariants of the engine, not performance: one statement and one commit per step. */
export const CHECKS: Array<{ key: string; label: string; expected: number }> = [
  {
    key: 'engine.statementsPerStep',
    label: 'one statement per compute step commit (every step)',
    expected: 1,
  },
  { key: 'engine.statementsPerStep.max', label: 'no step sent more than one statement', expected: 1 },
  { key: 'engine.commitsPerStep', label: 'one commit per compute step (server WAL)', expected: 1 },
  {
    key: 'engine.tx.roundTrips.max',
    label: 'four round trips per durable transaction (every one)',
    expected: 4,
  },
  { key: 'engine.tx.commitsPerStep', label: 'one commit per durable transaction (server WAL)', expected: 1 },
];

export interface Summary {
  meta: Record<string, unknown>;
  config: unknown;
  figures: FigureResult[];
  ratios: RatioResult[];
  checks: CheckResult[];
  details: Array<Record<string, unknown>>;
}

export function summarise(report: Report, config: unknown, meta: Record<string, unknown>): Summary {
  const figures = report.figures.map((f) => ({
    ...f,
    ...spread((report.values.get(f.key) ?? []).filter((v) => v !== undefined)),
  }));
  const ratios = report.ratios.map((r): RatioResult => {
    const rounds = report.pairs.get(r.key);
    const s = rounds
      ? spread(rounds)
      : pairRatios(
          (report.values.get(r.num) ?? []).map((v) => v ?? NaN),
          (report.values.get(r.den) ?? []).map((v) => v ?? NaN),
        );
    const meetsTarget = r.target
      ? r.target.op === '<='
        ? s.median <= r.target.value
        : s.median >= r.target.value
      : undefined;
    return { ...r, ...s, meetsTarget, per: rounds ? 'round' : 'repeat' };
  });
  const checks = CHECKS.map((c) => {
    const samples = (report.values.get(c.key) ?? []).filter((v) => v !== undefined);
    return { ...c, samples, ok: samples.length > 0 && samples.every((v) => Math.abs(v - c.expected) < 1e-9) };
  });
  return { meta, config, figures, ratios, checks, details: report.details };
}

function fmt(v: number, unit: string): string {
  if (!Number.isFinite(v)) return '-';
  if (unit === 'ms') return v.toFixed(3);
  if (unit === 'count') return v.toFixed(3);
  if (unit === 'bytes' || unit === 'µs') return v.toFixed(0);
  if (unit === 'x') return v.toFixed(2);
  return v >= 100 ? v.toFixed(0) : v.toFixed(1);
}

const pad = (s: string, n: number) => s.padEnd(n);
const lpad = (s: string, n: number) => s.padStart(n);

export function printReport(s: Summary): void {
  const m = s.meta;
  const n = s.figures[0]?.samples.length ?? 0;
  const w = 52;
  console.log(
    `\nnestjs-durable-execution bench: ${m.mode}, ${n} repeats, ${m.cpus} CPUs, node ${m.node}\n` +
      `${String(m.postgres).split(' on ')[0]}; database ${m.database}; ${m.durationSeconds} s\n` +
      `Absolute numbers depend on the machine; compare the ratios (each computed within one repeat).`,
  );
  let section = '';
  const head = `${pad('figure', w)} ${pad('unit', 8)}${lpad('median', 10)}${lpad('min', 10)}${lpad('max', 10)}`;
  for (const f of s.figures) {
    if (f.section !== section) {
      section = f.section;
      console.log(`\n${section}\n${head}`);
    }
    console.log(
      `${pad(f.label, w)} ${pad(f.unit, 8)}${lpad(fmt(f.median, f.unit), 10)}${lpad(fmt(f.min, f.unit), 10)}${lpad(fmt(f.max, f.unit), 10)}`,
    );
  }
  console.log(
    `\n5. Ratios (per round of blocks where n says rounds, else per repeat; median, quartiles, min / max)`,
  );
  console.log(
    `${pad('ratio', w)} ${pad('target', 8)}${lpad('median', 8)}${lpad('q1', 8)}${lpad('q3', 8)}` +
      `${lpad('min', 8)}${lpad('max', 8)}  n         verdict`,
  );
  for (const r of s.ratios) {
    const target = r.target ? `${r.target.op} ${r.target.value}` : '';
    const verdict = r.meetsTarget === undefined ? '' : r.meetsTarget ? 'meets target' : 'MISSES target';
    const x = (v: number) => lpad(fmt(v, 'x'), 8);
    const n = `${r.samples.length} ${r.per}s`.padEnd(10);
    console.log(
      `${pad(r.label, w)} ${pad(target, 8)}${x(r.median)}${x(r.q1)}${x(r.q3)}${x(r.min)}${x(r.max)}  ${n}${verdict}`,
    );
  }
  console.log('\nChecks');
  for (const c of s.checks) {
    const seen = c.samples.length ? c.samples.map((v) => fmt(v, 'count')).join(', ') : 'not measured';
    console.log(`${pad(c.label, w)} ${c.ok ? 'OK  ' : 'FAIL'}  (${seen})`);
  }
}
