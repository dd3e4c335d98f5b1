import { readFileSync } from 'node:fs';
import type { Headline } from './headline';

/**
 * `node -r ts-node/register/transpile-only bench/compare.ts A.json B.json [--tolerance 0.1]`
 * Repeatability of the headline: two results files of `npm run bench` (bench/results.json of two runs),
 * every target of issue 47 side by side, and whether the two values agree within the tolerance (10 %
 * by default: |a - b| / ((a + b) / 2)). Exits 1 if any ratio disagrees or is missing from either run.
 * The one target that is a figure and not a ratio (the pickup's p50, in ms) is shown beside them but
 * not held to the tolerance: nothing measured beside it cancels the machine's load out of it.
 */

function load(file: string): { meta: Record<string, unknown>; headline: Headline[] } {
  return JSON.parse(readFileSync(file, 'utf8'));
}

function main(): void {
  const args = process.argv.slice(2);
  const t = args.indexOf('--tolerance');
  const tolerance = t >= 0 ? Number(args.splice(t, 2)[1]) : 0.1;
  if (args.length !== 2 || !(tolerance > 0)) {
    console.error('usage: bench/compare.ts A.json B.json [--tolerance 0.1]');
    process.exit(2);
  }
  const [a, b] = args.map(load);
  const rows = a.headline.filter((h) => h.issue47);
  const ratios = rows.filter((h) => h.unit === 'x').length;
  const f = (v: number | undefined) => (v !== undefined && Number.isFinite(v) ? v.toFixed(3) : '-');
  console.log(
    `A: ${a.meta.date} (${a.meta.mode}, ${a.meta.durationSeconds} s)\nB: ${b.meta.date} (${b.meta.mode}, ` +
      `${b.meta.durationSeconds} s)\n\n${'figure'.padEnd(64)} ${'A'.padStart(8)} ${'B'.padStart(8)}  difference`,
  );
  let bad = 0;
  for (const h of rows) {
    const other = b.headline.find((x) => x.label === h.label);
    const va = h.value;
    const vb = other?.value;
    const ok = Number.isFinite(va) && vb !== undefined && Number.isFinite(vb);
    const diff = ok ? Math.abs(va - vb!) / ((va + vb!) / 2) : NaN;
    const agree = ok && diff <= tolerance;
    const ratio = h.unit === 'x';
    if (!agree && ratio) bad++;
    const verdicts = `${h.verdict ?? ''} / ${other?.verdict ?? ''}`;
    console.log(
      `${h.label.padEnd(64)} ${f(va).padStart(8)} ${f(vb).padStart(8)}  ` +
        `${ok ? `${(diff * 100).toFixed(1)} %` : '-'}`.padEnd(10) +
        ` ${agree ? 'agree' : ratio ? 'DISAGREE' : 'differ'}   (${verdicts})${ratio ? '' : ', a figure: not held to it'}`,
    );
  }
  console.log(
    `\n${ratios - bad} of ${ratios} ratios agree within ${(tolerance * 100).toFixed(0)} %` +
      (bad ? `; ${bad} do not` : ''),
  );
  process.exit(bad ? 1 : 0);
}

main();
