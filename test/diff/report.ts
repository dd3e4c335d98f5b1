/**
 * The differential test's report: cases run and skipped, divergences with their program and both
 * traces, the coverage table per rule, and (for the power check) mutations and the cases catching them.
 */
import type { CaseRun, DiffReport } from './property';
import { describeCase, GAP_UNITS, UNIT_MS } from './program';

/** The rules of issue 35 the table lists, always (a rule no case exercised shows 0). */
export const RULES = [
  'race',
  'any',
  'allSettled',
  'all',
  'seq',
  'loop',
  'loop (parallel)',
  'sleep fired',
  'signal wait without timeout: got a signal',
  'signal wait with timeout: got a signal',
  'signal wait timed out',
  'signal before wait',
  'two waits of one name pending (FIFO)',
  'loser signal wait took a later signal',
  'loser timer fired after its race',
  'loser step finished after its race',
  'loser cmd finished after its race',
  'step let finish after run() returned',
  'cmd let finish after run() returned',
  'try/catch timeout',
  'cancel while a step or command runs',
  'cancel while parked',
  'cancel after run() returned, calls still live',
  'cancel lost to the finish',
  'child waited for',
  'child waited for with a timeout',
  'child wait timed out (child cancelled)',
  'loser child ended after its race',
  'child ended while its parent ran a call',
  'patched in a loop: new path',
  'try: finally ran',
  'try: catch ran',
  'try: catch rethrew',
  'park inside a try block',
  'a try spanned a park: every execution checked',
  'hang: failed with StepTimeoutError',
  'hang: timed out, retried',
  'hang: its second attempt returned',
  'hang deaf: abandoned after its grace',
  'hang failed after its race',
  'hang returned after its race',
  'cancel while a body hangs',
  'hung loser abandoned after run() returned',
];

export function coverageTable(coverage: Map<string, number>, cases: number): string {
  const keys = [...RULES, ...[...coverage.keys()].filter((k) => !RULES.includes(k)).sort()];
  const width = Math.max(...keys.map((k) => k.length));
  return keys
    .map((k) => `  ${k.padEnd(width)}  ${String(coverage.get(k) ?? 0).padStart(4)} / ${cases} cases`)
    .join('\n');
}

/** One case in a few lines: the program, what the plain run says, what the durable run did. */
export function describeRun(r: CaseRun, unitMs = UNIT_MS): string {
  const d = r.durable;
  const late = Math.max(d.lateMs.call, d.lateMs.signal, d.lateMs.cancel);
  const suspect = r.divergences.length > 0 && late * 2 > GAP_UNITS * unitMs;
  return [
    `  program:  ${describeCase(r.p.c)}`,
    `  case:     ${JSON.stringify(r.p.c)}`,
    `  expected: ${JSON.stringify(r.p.plain.outcome.trace)} effects ${JSON.stringify(r.p.plain.effects)} (ends at ${r.p.plain.end} units)`,
    `  durable:  ${d.outcome ? JSON.stringify(d.outcome.trace) : `(no output: ${d.status}${d.error ? `, ${d.error}` : ''})`} effects ${JSON.stringify(d.effects)}`,
    ...r.divergences.map((x) => `  - ${x}`),
    `  run ${d.runId}, epoch ${d.epoch}; latest body call ${d.lateMs.call} ms after its time${d.lateMs.worst ? ` (${d.lateMs.worst})` : ''}, latest signal stored ${d.lateMs.signal} ms after its time${d.notes.length ? `; ${d.notes.join('; ')}` : ''}`,
    ...(suspect
      ? [
          `  (timing: a body was called, a signal or the cancel stored, more than half a gap late: the consequence of a late delivery, or the machine's; replay the case)`,
        ]
      : []),
  ].join('\n');
}

export function formatReport(r: DiffReport, title: string): string {
  const lines = [
    `${title}: seed ${r.seed}, ${r.runs.length} cases run (of ${r.generated} generated), ${(r.ms / 1000).toFixed(1)} s`,
    `not run (the plain run says they cannot be compared): ${[...r.skipped].map(([k, n]) => `${n} ${k}`).join(', ') || 'none'}`,
    `divergences: ${r.divergent.length}`,
    ...r.divergent.map((x) => `case #${x.index}:\n${describeRun(x)}`),
    `coverage per rule (cases that exercised it):`,
    coverageTable(r.coverage, r.runs.length),
  ];
  if (r.shrunk)
    lines.push(
      `shrunk counterexample (${r.shrinks} shrinks), case #${r.shrunk.index}:\n${describeRun(r.shrunk)}`,
    );
  return lines.join('\n');
}
