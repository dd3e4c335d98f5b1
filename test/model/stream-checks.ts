/**
 * Progress streams (issue 22), checked from the stored entries of a case's runs:
 * - each run's seqs are 1..n with no gap;
 * - an entry of the workflow body is written once (a replay finds its record and writes nothing), and
 *   a run that succeeded wrote every body emit of its program;
 * - a step's entries come in attempt order: no attempt writes after a later one began (a stale worker
 *   is fenced out), and the step's latest attempt in a run that succeeded wrote both of its entries.
 */
import type { TestDatabase } from '../helpers/database';
import type { Program } from './program';

interface Entry {
  run_id: string;
  seq: number;
  topic: string;
  epoch: string | number;
  step_index: number | null;
  attempt: number | null;
  data: { part?: number };
}

export async function checkStreams(
  db: TestDatabase,
  runIds: string[],
  programs: Program[],
  short: (id: string) => string,
): Promise<string[]> {
  const out: string[] = [];
  const rows: Entry[] = await db.query(
    `select run_id, seq, topic, epoch, step_index, attempt, data from ai_run_stream where run_id = any($1) order by run_id, seq`,
    [runIds],
  );
  const ended = new Map(
    (await db.query(`select id, status from ai_runs where id = any($1)`, [runIds])).map(
      (r: { id: string; status: string }) => [r.id, r.status],
    ),
  );
  runIds.forEach((id, r) => {
    const mine = rows.filter((e) => e.run_id === id);
    const run = short(id);
    mine.forEach((e, i) => {
      if (e.seq !== i + 1) out.push(`stream: ${run} has seq ${e.seq} at position ${i + 1}`);
    });
    const body = mine.filter((e) => e.step_index === null).map((e) => e.topic);
    for (const t of new Set(body))
      if (body.filter((x) => x === t).length > 1)
        out.push(`stream: ${run} wrote the body's entry ${t} ${body.filter((x) => x === t).length} times`);
    const bySteps = new Map<number, Entry[]>();
    for (const e of mine.filter((x) => x.step_index !== null))
      bySteps.set(e.step_index!, [...(bySteps.get(e.step_index!) ?? []), e]);
    const order = (e: Entry) => [Number(e.epoch), e.attempt ?? 0];
    for (const [step, es] of bySteps)
      for (let i = 1; i < es.length; i++) {
        const [a, b] = [order(es[i - 1]), order(es[i])];
        if (b[0] < a[0] || (b[0] === a[0] && b[1] < a[1]))
          out.push(
            `stream: ${run} step #${step}: attempt ${b.join('/')} wrote seq ${es[i].seq} after attempt ${a.join('/')} (a stale attempt)`,
          );
      }
    if (ended.get(id) !== 'succeeded') return;
    for (const op of programs[r].ops) {
      if (op.t !== 'emit') continue;
      const topics = op.where === 'fan' ? [`${op.id}a`, `${op.id}b`] : op.where === 'body' ? [op.id] : [];
      for (const t of topics)
        if (!body.includes(t)) out.push(`stream: ${run} succeeded without the body's entry ${t}`);
      if (op.where !== 'step') continue;
      const es = mine.filter((e) => e.topic === `s:${op.id}s`);
      const last = es[es.length - 1];
      const latest = last ? es.filter((e) => order(e).join() === order(last).join()) : [];
      if (latest.map((e) => e.data.part).join() !== '1,2')
        out.push(
          `stream: ${run} step ${op.id}s: its latest attempt wrote parts [${latest.map((e) => e.data.part)}]`,
        );
    }
  });
  return out;
}
