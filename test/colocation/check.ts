import { analyze } from './run-pinning';
import type { Ref, Val } from './pinning-values';
import { bodyStatements } from './plpgsql-body';
import { DYNAMIC, EXCEPTIONS, INLINE_META, PER_RUN, PerRun } from './classification';
import { LOCAL_TABLES, OTHER_DISTRIBUTED, REFERENCE_TABLES, RUN_TABLES } from './placement';
import type { StoreStatements } from './store-statements';

export const KEYS = { ...RUN_TABLES, ...OTHER_DISTRIBUTED };

const describeVal = (v: Val): string =>
  v.k === 'key' ? `run ${v.id}` : v.k === 'many' ? `many runs (${v.why})` : 'an unknown run';

/** What in one reference keeps a statement from staying in one run's shard; undefined when nothing. */
function refProblem(r: Ref, anchor: { id?: string }): string | undefined {
  const where = `${r.path}: ${r.table}`;
  if (r.table in RUN_TABLES) {
    if (r.val.k !== 'key')
      return `${where} is not pinned to one run: ${describeVal(r.val)}${r.via ? ` [${r.via}]` : ''}`;
    if (anchor.id !== undefined && anchor.id !== r.val.id)
      return `${where} is pinned to ${describeVal(r.val)}, another run than the statement's (${anchor.id}): a cross-run join`;
    anchor.id = r.val.id;
    if (r.conflict && !r.conflict.includes(RUN_TABLES[r.table]))
      return `${where}: ON CONFLICT (${r.conflict.join(', ')}) needs a unique index without ${RUN_TABLES[r.table]}: not enforceable per shard`;
    return undefined;
  }
  if (r.table in OTHER_DISTRIBUTED)
    return `${where} is distributed by ${OTHER_DISTRIBUTED[r.table]}, not by the run`;
  if (REFERENCE_TABLES.includes(r.table))
    return r.write ? `${where} is a reference table: a write goes to every node` : undefined;
  if (LOCAL_TABLES.includes(r.table)) return `${where} is coordinator-local`;
  return `${where}: unknown table (place it in test/colocation/classification.ts)`;
}

/** The problems of a statement held to stay inside one run; allowed CTEs excused (and required to matter). */
export function perRunProblems(
  sql: string,
  entry: PerRun = {},
  outer?: Record<string, Record<string, Val>>,
): string[] {
  const refs = analyze(sql, KEYS, outer);
  const anchor: { id?: string } = {};
  const problems: string[] = [];
  const excused = new Set<string>();
  // References pinned to one run fix the anchor first, so a lone stray is what gets reported.
  const order = [...refs].sort(
    (a, b) =>
      Number(b.val.k === 'key' && b.table in RUN_TABLES) - Number(a.val.k === 'key' && a.table in RUN_TABLES),
  );
  for (const r of order.filter((r) => !entry.allow?.[r.path.split('>')[0]])) {
    const p = refProblem(r, anchor);
    if (p) problems.push(p);
  }
  for (const r of refs.filter((r) => entry.allow?.[r.path.split('>')[0]])) {
    if (refProblem(r, { ...anchor })) excused.add(r.path.split('>')[0]);
  }
  for (const cte of Object.keys(entry.allow ?? {}))
    if (!excused.has(cte))
      problems.push(`allowed CTE ${cte} has nothing cross-run (any more): drop it from allow`);
  if (anchor.id === undefined) problems.push('touches no run table: not a per-run statement');
  return problems;
}

/** Every id the store defines or sends must be classified, and every classification must still exist. */
export function classificationProblems(store: StoreStatements): string[] {
  const problems: string[] = [];
  const ids = new Set([...store.constants, ...store.sent.keys()]);
  for (const id of ids) {
    const inline = /^(.*?):"/.exec(id);
    if (inline) {
      if (!INLINE_META[inline[1]])
        problems.push(
          `${id}: an inline statement outside the boot/DDL files: make it a *_SQL constant and classify it`,
        );
    } else if (!PER_RUN[id] && !EXCEPTIONS[id])
      problems.push(
        `${id} (sent at ${store.sent.get(id)?.join(', ') ?? 'nowhere'}) is not classified: add it to PER_RUN or EXCEPTIONS in test/colocation/classification.ts`,
      );
    if (PER_RUN[id] && EXCEPTIONS[id]) problems.push(`${id} is both per-run and an exception`);
  }
  for (const id of [...Object.keys(PER_RUN), ...Object.keys(EXCEPTIONS)])
    if (!ids.has(id)) problems.push(`${id} is classified but no longer in src/store: drop it`);
  for (const [site, at] of store.dynamic)
    if (!DYNAMIC[site])
      problems.push(`${site} (${at}) sends a statement through a variable: list what it may be in DYNAMIC`);
  for (const [site, prefixes] of Object.entries(DYNAMIC))
    for (const p of prefixes)
      if (![...store.constants].some((id) => id.startsWith(p)))
        problems.push(`${site}: ${p} matches no constant`);
  for (const [id, e] of Object.entries(EXCEPTIONS))
    if (e.kind === 'fragment' && store.sent.has(id))
      problems.push(`${id} is listed as a fragment but is sent at ${store.sent.get(id)}`);
  return problems;
}

/** Exceptions must be what they claim: cross-run ones are not safe as per-run, other-data ones touch no run table. */
export function exceptionProblems(store: StoreStatements): string[] {
  const problems: string[] = [];
  for (const [id, e] of Object.entries(EXCEPTIONS)) {
    const text = store.texts.get(id);
    if (text === undefined || e.kind === 'meta' || e.kind === 'fragment') continue;
    if (e.kind === 'cross-run' && perRunProblems(text).length === 0)
      problems.push(`${id} is listed as cross-run but stays in one run now: move it to PER_RUN`);
    if (e.kind === 'other-data') {
      const runRefs = analyze(text, KEYS).filter((r) => r.table in RUN_TABLES);
      if (runRefs.length)
        problems.push(`${id} is listed as other data but touches ${runRefs.map((r) => r.table).join(', ')}`);
    }
  }
  return problems;
}

/** A trigger function's statements, each held to the row's own run (`new.id`). */
export function triggerProblems(body: string): string[] {
  const outer = { new: { id: { k: 'key', id: 'new.id' } as Val, run_id: { k: 'key', id: 'new.id' } as Val } };
  return bodyStatements(body).flatMap((sql) =>
    perRunProblems(sql, {}, outer)
      .filter((p) => !p.startsWith('touches no run table'))
      .map((p) => `${p} in: ${sql.slice(0, 80)}`),
  );
}
