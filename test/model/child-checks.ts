/**
 * The promise of child runs (issue 21), checked on the record: every child was started once, at the
 * position its parent recorded; every child ended (its parent's end or timeout cancels it), and its end
 * reached its parent exactly once; what the parent saw of a child is the child's stored output (after a
 * lost WAL suffix: what a parent saw on the old timeline may be an output the child recorded again since).
 */
import { isDeepStrictEqual } from 'node:util';
import { generations, type Rows } from './record-checks';
import { timelineOf, type World } from './world';

const TERMINAL = ['succeeded', 'failed', 'cancelled', 'dead_lettered'];

/** `children`: the rows of every run whose parent is one of the case's runs. */
export function checkChildren(
  rows: Rows,
  children: any[],
  world: World,
  short: (id: string) => string,
): string[] {
  const out: string[] = [];
  const byId = new Map(children.map((c) => [c.id as string, c]));
  // A parent continued as new: its generation now (keys name it from 1 on), and the children its
  // earlier generations started, whose starts were deleted with their record.
  const generation = generations(rows);
  const keyOf = (parent: string, index: number) =>
    `child:${parent}${generation.get(parent) ? `:g${generation.get(parent)}` : ''}:${index}`;
  const earlier = (child: any) =>
    generation.has(child.parent_id) &&
    !child.idempotency_key.startsWith(`child:${child.parent_id}:g${generation.get(child.parent_id)}:`);
  const starts = rows.checkpoints.filter((cp) => /^\$child:/.test(cp.step_name));
  for (const cp of starts) {
    const child = byId.get(cp.output?.runId);
    const where = `${short(cp.run_id)} child start at step ${cp.step_index}`;
    if (!child) out.push(`${where} names ${cp.output?.runId}, which is not a child of it`);
    else if (child.parent_id !== cp.run_id || child.idempotency_key !== keyOf(cp.run_id, cp.step_index))
      out.push(`${where}: its run has parent ${child.parent_id} and key ${child.idempotency_key}`);
  }
  const named = new Set(starts.map((cp) => cp.output?.runId));
  for (const child of children) {
    const parent = short(child.parent_id);
    if (!named.has(child.id) && !earlier(child))
      out.push(`${parent} has child ${child.id} that no recorded start names`);
    if (!TERMINAL.includes(child.status))
      out.push(`${parent}'s child ${child.input?.op} is ${child.status} after the case settled`);
    const ended = rows.events.filter(
      (e) => e.run_id === child.parent_id && e.event_type === 'child.ended' && e.payload?.child === child.id,
    );
    if (TERMINAL.includes(child.status) && ended.length !== 1)
      out.push(
        `${parent}'s child ${child.input?.op} ended ${child.status}; its parent has ${ended.length} child.ended`,
      );
  }
  // What a parent saw of an awaited child is that child's stored output (any epoch, replayed or live).
  for (const o of world.observations) {
    if (!Array.isArray(o.value)) continue;
    for (const v of o.value as Array<{ op?: string }>) {
      const child = children.find((c) => c.parent_id === o.runId && c.input?.op === v?.op);
      if (!child) continue;
      // With a lost suffix, a parent on the old timeline may have seen an output the new primary lost:
      // the child ran again on the new timeline (its last claim's) and ended with another.
      if (world.lostSuffix && timelineOf(o.epoch) < Number(child.timeline)) continue;
      if (child.status !== 'succeeded' || !isDeepStrictEqual(child.output, v))
        out.push(
          `${short(o.runId)} saw child ${v.op} return ${JSON.stringify(v)}; it is ${child.status} with ${JSON.stringify(child.output)}`,
        );
    }
  }
  return out;
}
