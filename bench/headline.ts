import { spread, Spread } from './stats';

/**
 * The headline of `npm run bench`: every target of the benchmark issues with its figure, the figure's
 * spread and met / missed. Issue 47's targets come first (`issue47`); each of them is either a ratio
 * taken per pair of neighbouring blocks inside one part (engine and reference alternating a few seconds
 * apart) and reported as the median over the pairs, or, for the pickup, a figure per block. The spread
 * beside it is over those pairs (or blocks): interquartile range and min-max, with their count.
 */
export interface Headline {
  label: string;
  value: number;
  unit: string;
  target?: { op: '<=' | '>=' | '='; value: number };
  verdict?: 'met' | 'missed' | 'not measured';
  /** Over what `value` is the median of, when it is one. */
  spread?: Pick<Spread, 'q1' | 'q3' | 'min' | 'max'> & { n: number; per: string };
  /** A target of issue 47's table: what two consecutive quick runs must agree on within 10 %. */
  issue47?: boolean;
  how: string;
}

export type Parts = Partial<
  Record<'core' | 'peers' | 'workers' | 'scale' | 'limits' | 'transport' | 'boot', any>
>;

/** The spread fields of a headline row from a part's Spread (samples counted). */
function spreadOf(s: Spread | undefined, per: string): Headline['spread'] {
  if (!s || !Number.isFinite(s.median)) return undefined;
  return { q1: s.q1, q3: s.q3, min: s.min, max: s.max, n: s.samples?.length ?? 0, per };
}

/** A row whose value is the median of `s`. */
function row(
  label: string,
  s: Spread | undefined,
  per: string,
  how: string,
  extra: Partial<Headline> = {},
): Headline {
  return { label, value: s?.median ?? NaN, unit: 'x', spread: spreadOf(s, per), how, ...extra };
}

const find = (list: any[] | undefined, key: string): Spread | undefined =>
  list?.find((x: any) => x.key === key);

/** Issue 47's table: one row per target, in its order. */
function issue47Rows(r: Parts): Headline[] {
  const { core, peers, workers, scale, limits, transport, boot } = r;
  const t = (op: '<=' | '>=', value: number) => ({ target: { op, value }, issue47: true });
  const peer = (key: string) => find(peers?.ratios, key);
  return [
    row(
      'step commit p50 / raw fenced UPDATE p50',
      find(core?.ratios, 'stepLatency'),
      'round',
      'core: sequential, one block each of raw UPDATE, raw STEP_WRITE_SQL and engine steps per round; ' +
        'block p50 / block p50, per round',
      t('<=', 1.2),
    ),
    row(
      'DBOS step p50 / engine step p50',
      peer('dbosStep'),
      'pair',
      'peers: sequential 10-step runs, engine and DBOS blocks alternating; per pair of blocks',
      t('>=', 4),
    ),
    row(
      '3-step runs/s @16: engine / DBOS direct',
      peer('dbosDirect'),
      'pair',
      'peers: 16 callers start 3-step runs while the worker runs them; per pair of blocks',
      t('>=', 3),
    ),
    row(
      '1-step runs/s: engine / graphile-worker (peers part)',
      peer('graphileDrain'),
      'pair',
      'peers: n runs / jobs inserted in one statement, an idle worker woken; per pair of blocks',
      t('>=', 1.2),
    ),
    row(
      '1-step runs/s: worker process / graphile-worker (workers part)',
      find(workers?.ratios, 'engineOverGraphile'),
      'pair',
      'workers: one compiled worker process against a graphile-worker runner, same workload; per pair of blocks',
      t('>=', 1.2),
    ),
    {
      ...row(
        'pickup p50, idle worker process (start -> step body)',
        find(workers?.figures, 'pickup.proc.db.p50'),
        'block',
        'workers: database clock on both ends, worker in its own OS process; p50 per block',
        t('<=', 2),
      ),
      unit: 'ms',
    },
    row(
      'pickup p50: graphile-worker / engine (peers part)',
      peer('graphilePickup'),
      'pair',
      'peers: add / start -> task / step body entered, one at a time; per pair of blocks',
      t('>=', 1),
    ),
    row(
      'claim p50, most runs held back by a full limit / none',
      limits?.heldBack?.ratioSpread,
      'pair',
      'limits: CLAIM_LIMITED_SQL of a due run, blocks alternating between a database where 100,000 runs ' +
        '(smoke: 200) of a full kind are held back and one where none are; per pair of blocks',
      t('<=', 1.2),
    ),
    row(
      '1-step runs/s: kind limited / no limit',
      limits?.runsPerSecond?.ratio,
      'pair',
      'limits: claim + step + finish on one connection, blocks alternating; per pair of blocks',
      t('>=', 0.9),
    ),
    row(
      'claim p50 at 1 million / at 1 thousand terminal runs',
      scale?.ratios?.dueP50LargestOverSmallest,
      'block',
      'scale: CLAIM_RUNS_SQL with one run due, the sizes alternating inside each block; per block',
      t('<=', 1.2),
    ),
    row(
      'fenced transport: fetch req/s, gated call / plain',
      find(transport?.ratios, 'fetch.seq.gatedOverPlain'),
      'repeat',
      'transport: sequential fetch, a fresh WireGate per request / nothing installed; neighbouring blocks',
      t('>=', 0.95),
    ),
    row(
      'worker ready (start -> first claim) / plain Nest context',
      boot?.ratios?.readyOverPlain,
      'pair',
      'boot: fresh OS processes (compiled JS), the same TypeORM DataSource, alternating; per pair of boots',
      t('<=', 1.3),
    ),
  ];
}

/** Figures without a target of issue 47, or of earlier issues: context for the rows above. */
function contextRows(r: Parts): Headline[] {
  const { core, peers, workers, transport, boot } = r;
  const fig = (part: any, key: string) => find(part?.figures, key);
  const graphile = find(
    peers?.workloads?.map((w: any) => ({ key: w.key, ...w.perSecond })),
    'graphile-worker.drain',
  );
  const count = (label: string, s: Spread | undefined, how: string, expected?: number): Headline => ({
    ...row(label, s, 'repeat', how),
    unit: 'count',
    ...(expected === undefined ? {} : { target: { op: '=' as const, value: expected } }),
  });
  const rows: Headline[] = [
    count(
      'statements per compute step commit (client)',
      fig(core, 'engine.statementsPerStep'),
      'core: every pool.query sent during a step call, sequential runs',
      1,
    ),
    count(
      'commits per compute step (server WAL)',
      fig(core, 'engine.commitsPerStep'),
      'core: COMMIT records of the bench database read with pg_walinspect',
      1,
    ),
    row(
      '3-step runs/s @16: engine / raw loop',
      find(core?.ratios, 'run3Throughput'),
      'repeat',
      'core: steady-state window, per repeat (issue 38: >= 0.8)',
      { target: { op: '>=', value: 0.8 } },
    ),
    row(
      'durable transaction p50 / plain BEGIN+INSERT+COMMIT p50',
      find(core?.ratios, 'txLatency'),
      'repeat',
      'core: a @DurableTransaction step with one INSERT against the same INSERT in a plain transaction',
    ),
    ...(peers?.ratios ?? [])
      .filter((q: any) => !['dbosStep', 'dbosDirect', 'graphileDrain', 'graphilePickup'].includes(q.key))
      .map((q: any) => row(`  ${q.label}`, q, 'pair', `peers: ${q.how}`)),
    {
      ...row(
        '  job-style runs/s, no step (workers part) / graphile-worker',
        graphile && spread([(fig(workers, 'engine0.k1')?.median ?? NaN) / graphile.median]),
        'ratio of medians',
        'medians of two parts: workers engine0.k1 (claim + finish only) / peers graphile-worker.drain',
      ),
      spread: undefined,
    },
    {
      ...row(
        "  raw pickup p50: insert + NOTIFY -> LISTEN, read, mark (the pickup's physical limit)",
        fig(workers, 'pickup.raw.db.p50'),
        'block',
        'workers: node-postgres, dedicated connections, no engine; blocks beside the pickup blocks',
      ),
      unit: 'ms',
    },
    row(
      '  pickup p50: worker process / raw pickup',
      find(workers?.ratios, 'pickupProcOverRaw'),
      'block',
      'workers: database clock, engine and raw blocks alternating in one worker process',
    ),
    row(
      '  pickup p50: worker process / in-process',
      find(workers?.ratios, 'pickupProcOverInproc'),
      'pair',
      'workers: database clock, blocks alternating',
    ),
    row(
      '  worker CPU to first claim / plain Nest context',
      boot?.ratios?.cpuOverPlain,
      'pair',
      'boot: user + system CPU of each process until ready, per pair of boots',
    ),
    {
      ...row(
        'worker RSS, 1,000 parked + 1,000 queued + 100 in flight',
        fig(workers, 'mem.busy.rss'),
        'repeat',
        'workers: one worker process, concurrency 100, after a full GC',
      ),
      unit: 'MiB',
    },
  ];
  for (const c of ['fetch', 'http'] as const) {
    const name = c === 'fetch' ? 'fetch' : 'node:http';
    const q = (key: string) => find(transport?.ratios, key);
    const how = (what: string) =>
      `transport: ${what}, loopback keep-alive, per repeat of neighbouring blocks`;
    if (c === 'http')
      rows.push(
        row(
          `  ${name} req/s, gated call / plain`,
          q(`${c}.seq.gatedOverPlain`),
          'repeat',
          how('sequential'),
          {
            target: { op: '>=', value: 0.95 },
          },
        ),
      );
    rows.push(
      row(
        `  ${name} req/s @16, gated call / plain`,
        q(`${c}.c16.gatedOverPlain`),
        'repeat',
        how('16 in flight'),
        {
          target: { op: '>=', value: 0.95 },
        },
      ),
      row(
        `  ${name} req/s @16, gated call / call, no transport`,
        q(`${c}.c16.gatedOverOff`),
        'repeat',
        how('16'),
      ),
      {
        ...row(
          `  ${name} p50, gated - ungated call`,
          fig(transport, `${c}.paired.deltaUs`),
          'repeat',
          how('alternating'),
        ),
        unit: 'µs',
      },
    );
  }
  rows.push(
    {
      ...row(
        '  socket.write, gated call - plain',
        fig(transport, 'socket.seq.usPerWrite'),
        'repeat',
        'transport: per write of a burst of 64',
      ),
      unit: 'µs',
    },
    {
      ...row(
        '  pg select 1, gated call - plain',
        fig(transport, 'pg.seq.usPerRequest'),
        'repeat',
        'transport: per query',
      ),
      unit: 'µs',
    },
  );
  return rows;
}

export function headline(r: Parts): Headline[] {
  const rows = [...issue47Rows(r), ...contextRows(r)];
  for (const h of rows) {
    if (!h.target) continue;
    if (!Number.isFinite(h.value)) h.verdict = 'not measured';
    else if (h.target.op === '=') h.verdict = Math.abs(h.value - h.target.value) < 1e-9 ? 'met' : 'missed';
    else if (h.target.op === '<=') h.verdict = h.value <= h.target.value ? 'met' : 'missed';
    else h.verdict = h.value >= h.target.value ? 'met' : 'missed';
  }
  return rows;
}

/** A value as the headline prints it. */
export function num(v: number, unit: string): string {
  if (!Number.isFinite(v)) return '-';
  if (unit === 'count') return v.toFixed(3);
  if (unit === 'MiB') return v.toFixed(0);
  if (unit === 'µs') return v.toFixed(1);
  return v.toFixed(2);
}

/** `q1-q3 / min-max (n per)` of a row, or ''. */
export function spreadText(h: Headline): string {
  const s = h.spread;
  if (!s) return '';
  const f = (v: number) => num(v, h.unit);
  return `${f(s.q1)}-${f(s.q3)}   ${f(s.min)}-${f(s.max)}   ${s.n} ${s.per}${s.n === 1 ? '' : 's'}`;
}

export function printHeadline(rows: Headline[], meta: Record<string, unknown>): void {
  console.log(
    `\n=== Headline: ${meta.date}, ${meta.cpus} x ${meta.cpuModel}, node ${meta.node}, ${meta.mode}, ` +
      `${meta.durationSeconds} s ===\n` +
      `Each value: the median over pairs of neighbouring blocks (or blocks, repeats: the n column); ` +
      `beside it the interquartile range and min-max.`,
  );
  const head = (title: string) =>
    console.log(
      `\n${title.padEnd(64)} ${'value'.padStart(8)} ${'unit'.padEnd(5)} ${'target'.padEnd(8)} ${'verdict'.padEnd(12)} IQR   min-max   n`,
    );
  head("Issue 47's targets");
  let context = false;
  for (const h of rows) {
    if (!h.issue47 && !context) {
      context = true;
      head('Other figures (earlier targets, context)');
    }
    const target = h.target ? `${h.target.op} ${h.target.value}` : '';
    console.log(
      `${h.label.padEnd(64)} ${num(h.value, h.unit).padStart(8)} ${h.unit.padEnd(5)} ${target.padEnd(8)} ` +
        `${(h.verdict ?? '').padEnd(12)} ${spreadText(h)}`,
    );
  }
}
