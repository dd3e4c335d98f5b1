import { isHeld, limitScope, RUN_VIEW_COLUMNS, runViewColumns, toRunView } from './run-row.mapper';

describe('the run view mapper', () => {
  it('reads only the columns the statements that return a run name (RUN_VIEW_COLUMNS, never `*`)', () => {
    const read = new Set<string>();
    toRunView(new Proxy({}, { get: (_, k) => (typeof k === 'string' && read.add(k), undefined) }));
    expect([...read].filter((c) => !(RUN_VIEW_COLUMNS as readonly string[]).includes(c))).toEqual([]);
    expect(runViewColumns('r')).toMatch(/^r\.id, r\.kind, /);
  });

  it('parses a stored limit scope into which limit, kind and key', () => {
    expect(limitScope(null)).toBeNull();
    expect(limitScope('["triage"]')).toEqual({ limit: 'concurrency', kind: 'triage', scope: '["triage"]' });
    expect(limitScope('["triage", "acme"]')).toEqual({
      limit: 'concurrency',
      kind: 'triage',
      key: 'acme',
      scope: '["triage", "acme"]',
    });
    expect(limitScope('{"rate": ["enrich"]}')).toEqual({
      limit: 'rate',
      kind: 'enrich',
      scope: '{"rate": ["enrich"]}',
    });
    expect(limitScope('{"rate": ["enrich", "A"]}')).toMatchObject({
      limit: 'rate',
      kind: 'enrich',
      key: 'A',
    });
  });

  it('tells a run held on non-determinism from one waiting otherwise', () => {
    expect(isHeld('waiting', { code: 'DURABLE_NON_DETERMINISM' })).toBe(true);
    expect(isHeld('waiting', null)).toBe(false);
    expect(isHeld('waiting', { code: 'DURABLE_STEP_TIMEOUT' })).toBe(false);
    expect(isHeld('failed', { code: 'DURABLE_NON_DETERMINISM' })).toBe(false);
  });
});
