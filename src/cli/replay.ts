import { writeFileSync, readFileSync } from 'node:fs';
import { Pool } from 'pg';
import { ReplayChecker, ReplayCheckResult } from '../engine/replay-check';
import { HISTORY_FORMAT, RunHistory } from '../interfaces/run-history.interface';
import { readRunHistory } from '../store/replay-history.store';
import { durableNames } from '../store/durable-names';
import { requireAppModule, withAppContext } from './operator-context';
import { printableJsonText } from './printable';

type Out = (line: string) => void;

/** `export --run ID [--out FILE]`: a run's record as one JSON document (stdout without --out). */
export async function exportRun(
  url: string,
  schema: string | undefined,
  runIds: string[],
  outFile: string | undefined,
  out: Out,
): Promise<number> {
  const names = durableNames(schema);
  const pool = new Pool({ connectionString: url, max: 1 });
  try {
    const histories: RunHistory[] = [];
    for (const id of runIds) {
      const h = await readRunHistory((sql, params) => pool.query(sql(names), params), id);
      if (!h) throw new Error(`no run ${id} in ${names.label('ai_runs')}`);
      histories.push(h);
    }
    const text = JSON.stringify(histories.length === 1 ? histories[0] : histories, null, 2);
    if (outFile) {
      writeFileSync(outFile, `${text}\n`);
      out(`durable-execution: exported ${histories.length} run(s) to ${outFile}`);
    } else out(printableJsonText(text));
    return 0;
  } finally {
    await pool.end();
  }
}

/** What `replay` replays, as parsed from its flags. */
export interface ReplayTargets {
  app: string;
  runIds: string[];
  kind?: string;
  limit?: number;
  histories: string[];
}

/** How a line tells a run held for non-determinism. */
const HELD = { replays: '  held: replays now', diverges: '  held: still diverges', no: '' } as const;

/**
 * `replay --app MODULE[#Export] (--kind K | --run ID | --history FILE)…`: boots the app module (its
 * workers and reconciler stay off: DURABLE_EXECUTION_REPLAY_ONLY) and replays the runs against its
 * workflow code. Exit 1 when one did not replay (a run held for non-determinism that still diverges
 * included; one that replays now is `ok`, marked `held: replays now`).
 */
export async function replayWithApp(t: ReplayTargets, out: Out): Promise<number> {
  return withAppContext(requireAppModule(t.app), async (app) => {
    const checker = app.get(ReplayChecker, { strict: false });
    const results: ReplayCheckResult[] = [];
    for (const id of t.runIds) results.push(await checker.check(id));
    if (t.kind) results.push(...(await checker.checkKind(t.kind, t.limit)));
    for (const f of t.histories) {
      const doc = JSON.parse(readFileSync(f, 'utf8')) as RunHistory | RunHistory[];
      for (const h of Array.isArray(doc) ? doc : [doc]) {
        if (h?.format !== HISTORY_FORMAT) throw new Error(`${f} is not a ${HISTORY_FORMAT} document`);
        results.push(await checker.checkHistory(h));
      }
    }
    let failed = 0;
    for (const r of results) {
      const verdict = r.problems.length ? 'FAIL' : r.ended === 'skipped' ? 'skip' : 'ok';
      if (r.problems.length) failed++;
      out(
        `${verdict}  ${r.runId}  ${r.kind}  ${r.status}  ${r.ended}${HELD[r.held ?? 'no']}${r.problems.length ? `: ${r.problems.join('; ')}` : ''}`,
      );
    }
    const held = results.filter((r) => r.held === 'replays').length;
    out(
      `durable-execution: ${results.length - failed}/${results.length} run(s) replayed as recorded${held ? `; ${held} held run(s) replay now (retry-held resumes them)` : ''}`,
    );
    return failed ? 1 : 0;
  });
}
