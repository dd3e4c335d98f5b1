/**
 * Checks on the record alone: no run stranded behind a park, no write of a superseded epoch, every
 * failed run says why, and a deterministic program never fails.
 */
import { expectedFailure } from './grammar';
import type { Case } from './program';

export interface Rows {
  runs: any[];
  commands: any[];
  checkpoints: any[];
  events: any[];
  signals: any[];
}

const TERMINAL = ['succeeded', 'failed', 'cancelled', 'dead_lettered'];

/** The generation each run continued as new to (`ctx.continueAsNew`); absent: generation 0. */
export function generations(rows: Rows): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of rows.events)
    if (e.event_type === 'run.continued_as_new') out.set(e.run_id, Number(e.payload?.generation));
  return out;
}
const KEY = /(run_[0-9a-f-]+(?::g\d+)?:(?:step_\d+(?::tool_call_[^\s:]+)?|key_[A-Za-z0-9_.-]+):[a-z_]+)/;

export function checkRecord(rows: Rows, c: Case, runIds: string[], short: (id: string) => string): string[] {
  const out: string[] = [];
  for (const run of rows.runs) {
    const name = short(run.id);
    const program = c.programs[runIds.indexOf(run.id)];
    if (['failed', 'dead_lettered'].includes(run.status) && !run.error)
      out.push(`${name} is ${run.status} with no error`);
    const hasNul = program.ops.some((o) => o.t === 'step' && o.nul !== 'none');
    // A misuse the program makes on purpose fails it, with that error (and only that one).
    const expected = expectedFailure(program.ops);
    const meant = run.status === 'failed' && expected !== null && run.error?.code === expected;
    if (run.status === 'dead_lettered' || (run.status === 'failed' && !hasNul && !meant))
      out.push(`${name} ${run.status}: ${run.error?.message ?? '(no error)'}`);
    if (TERMINAL.includes(run.status)) continue;
    if (run.cancel_requested_at) out.push(`${name} is ${run.status} with a cancel request left behind`);
    if (run.status !== 'waiting' || !run.forever) {
      const trail = rows.events.filter((e) => e.run_id === run.id).map((e) => e.event_type);
      out.push(`${name} is ${run.status} (not settled; events: ${trail.join(' ')})`);
      continue;
    }
    // Parked until someone acts: only for an operator, on a command still waiting for one.
    const waited = new Set(
      rows.checkpoints
        .filter((cp) => cp.run_id === run.id && cp.step_name.startsWith('$signal:'))
        .map((cp) => cp.step_name.slice('$signal:'.length)),
    );
    for (const s of rows.signals)
      if (s.run_id === run.id && !s.consumed_at && !waited.has(s.name))
        out.push(`${name} parked (${run.parked_reason}) with signal "${s.name}" stored and never consumed`);
    const key = KEY.exec(run.parked_reason ?? '')?.[1];
    const cmd = key && rows.commands.find((r) => r.idempotency_key === key);
    if (!cmd) {
      out.push(`${name} parked forever for no operator: ${run.parked_reason}`);
      continue;
    }
    const wants = /approval/.test(run.parked_reason) ? 'awaiting_approval' : 'in_doubt';
    if (cmd.status !== wants)
      out.push(
        `${name} parked (${run.parked_reason.slice(0, 40)}…) but its command is already ${cmd.status}`,
      );
  }
  out.push(...checkEpochs(rows, short));
  return out;
}

/**
 * Nothing from a superseded epoch landed: along a run's event trail (ids follow the run row's lock
 * order) epochs never go down, every epoch that wrote was claimed, and every step or command
 * checkpoint has its event, written by the same epoch.
 */
function checkEpochs(rows: Rows, short: (id: string) => string): string[] {
  const out: string[] = [];
  for (const run of rows.runs) {
    const events = rows.events.filter((e) => e.run_id === run.id);
    const claimed = new Set(events.filter((e) => e.event_type === 'run.claimed').map((e) => Number(e.epoch)));
    let top = 0;
    for (const e of events) {
      const ep = Number(e.epoch);
      if (ep < top)
        out.push(`${short(run.id)} event ${e.event_type} of epoch ${ep} after one of epoch ${top}`);
      top = Math.max(top, ep);
      if (ep > 0 && !claimed.has(ep))
        out.push(`${short(run.id)} event ${e.event_type} of unclaimed epoch ${ep}`);
    }
    for (const cp of rows.checkpoints.filter((x) => x.run_id === run.id)) {
      const ep = Number(cp.epoch);
      if (!claimed.has(ep)) out.push(`${short(run.id)} checkpoint ${cp.step_name} of unclaimed epoch ${ep}`);
      if (cp.step_name.startsWith('$')) continue;
      const ev = events.filter(
        (e) => Number(e.payload?.step) === cp.step_index && e.event_type !== 'run.claimed',
      );
      if (
        !ev.some(
          (e) =>
            Number(e.epoch) === ep &&
            /checkpoint_saved|step\.failed|command_|command\.resolved/.test(e.event_type),
        )
      )
        out.push(
          `${short(run.id)} checkpoint ${cp.step_index} (${cp.step_name}, epoch ${ep}) has no event of its epoch`,
        );
    }
  }
  return out;
}
