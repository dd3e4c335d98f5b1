import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { REDACT_SURFACES } from '../options/redact';
import { DURABLE_EVENT_TYPES, isDurableEvent } from './events.interface';

/** Every .ts file under `dir` but specs and the event list itself. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const file = path.join(dir, e.name);
    if (e.isDirectory()) return sources(file);
    if (!e.name.endsWith('.ts') || e.name.endsWith('.spec.ts') || e.name === 'events.interface.ts') return [];
    return [file];
  });
}

const SRC = path.resolve(__dirname, '..');
/** Migrations write events too: the trigger that ends a child run writes `child.ended` on its parent. */
const MIGRATIONS = path.resolve(SRC, '..', 'migrations');
const PREFIX = '(?:run|step|model|tool|command|signal|child)';
/** A quoted event type: 'run.claimed' in TypeScript or in SQL text. */
const LITERAL = new RegExp(`['"\`](${PREFIX}\\.[a-z_]+)['"\`]`, 'g');
/** An event type built from a template: `tool.command_${row.status}`. */
const TEMPLATE = new RegExp(`\`(${PREFIX}\\.[a-z_]*)\\$\\{([^}]+)\\}\``, 'g');

/** Literals with an event-like spelling that are not stored event types, and why. */
const NOT_EVENTS: Record<string, string> = {
  // The `redact` hook's type for a cancel: stored as run.cancelled or run.cancel_requested.
  'run.cancel': 'redact key of RunRepository.cancel()',
  // Columns of STEP_BATCH_SQL's CTE `run` (group commit), handed to insertRecords as SQL.
  'run.records': 'SQL column of a CTE',
  'run.attempt': 'SQL column of a CTE',
  // Surfaces of run data the `redact` hook is called with when the admin module shows them.
  ...Object.fromEntries(REDACT_SURFACES.map((s) => [s, 'redact surface, not an event'])),
};
/** What each event-type template can produce (checked against the code by hand when one is added). */
const TEMPLATES: Record<string, string[]> = {
  'tool.command_${row.status}': ['tool.command_failed', 'tool.command_rejected'],
};

describe('DurableEventType', () => {
  const found = new Map<string, string[]>();
  const templates = new Set<string>();
  for (const file of [...sources(SRC), ...sources(MIGRATIONS)]) {
    const text = readFileSync(file, 'utf8');
    const rel = path.relative(SRC, file);
    for (const m of text.matchAll(LITERAL)) found.set(m[1], [...(found.get(m[1]) ?? []), rel]);
    for (const m of text.matchAll(TEMPLATE)) templates.add(`${m[1]}\${${m[2]}}`);
  }

  it('finds the event types written in SQL and in TypeScript', () => {
    expect(found.has('run.claimed')).toBe(true); // claim-runs.sql.ts
    expect(found.has('run.checkpoint_saved')).toBe(true); // active-run.ts
    expect(found.size).toBeGreaterThan(20);
  });

  it('lists every event type literal found under src/', () => {
    const missing = [...found.keys()].filter(
      (t) => !(DURABLE_EVENT_TYPES as readonly string[]).includes(t) && !(t in NOT_EVENTS),
    );
    expect(missing.map((t) => `${t} (${found.get(t)!.join(', ')})`)).toEqual([]);
  });

  it('knows every event type template and lists what it produces', () => {
    expect([...templates].filter((t) => !(t in TEMPLATES))).toEqual([]);
    for (const t of Object.values(TEMPLATES).flat()) expect(DURABLE_EVENT_TYPES).toContain(t);
  });

  it('lists no event type that the code no longer writes', () => {
    const produced = new Set([...found.keys(), ...Object.values(TEMPLATES).flat()]);
    expect(DURABLE_EVENT_TYPES.filter((t) => !produced.has(t))).toEqual([]);
  });

  it('documents every event type in docs/EVENTS.md', () => {
    const doc = readFileSync(path.resolve(SRC, '..', 'docs', 'EVENTS.md'), 'utf8');
    expect(DURABLE_EVENT_TYPES.filter((t) => !doc.includes(`\`${t}\``))).toEqual([]);
  });

  it('narrows a stored event by its type', () => {
    const e: { type: string; payload: unknown } = {
      type: 'run.claimed',
      payload: { workerId: 'w', attempt: 1 },
    };
    if (!isDurableEvent(e, 'run.claimed')) throw new Error('not narrowed');
    expect(e.payload.workerId).toBe('w');
    expect(isDurableEvent(e, 'run.created')).toBe(false);
  });
});
