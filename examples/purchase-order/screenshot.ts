/**
 * `npm run demo:screenshot`: screenshots of a running inspector (the one `npm run demo -- --inspect`
 * or `npm run start:demo` serves) in headless Chromium: the runs list with its status counts, and one
 * run the rolling deploy interrupted and another worker resumed (see inspector/capture.ts).
 *
 *   npm run demo:screenshot -- --url http://127.0.0.1:3001/durable --key <key> --out docs
 *
 * `--key` defaults to DEMO_ADMIN_KEY; leave it out for an anonymous inspector. `npm run demo --
 * --screenshot DIR` does the same at the end of a demo, without a server left running.
 */
import path from 'node:path';
import { captureInspector } from './inspector/capture';

async function main(argv: string[]) {
  let url = 'http://127.0.0.1:3001/durable';
  let key: string | null = process.env.DEMO_ADMIN_KEY ?? null;
  let outDir = path.resolve('docs');
  let prefix: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s);
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    if (flag === '--url') url = value();
    else if (flag === '--key') key = value();
    else if (flag === '--out') outDir = path.resolve(value());
    else if (flag === '--prefix') prefix = value();
    else if (flag === '--help' || flag === '-h') {
      process.stdout.write(
        'npm run demo:screenshot -- [--url http://127.0.0.1:3001/durable] [--key KEY] [--out DIR] [--prefix demo-inspector]\n',
      );
      return;
    } else throw new Error(`unknown option ${argv[i]} (try --help)`);
  }
  const shot = await captureInspector({ url, key, outDir, prefix });
  process.stdout.write(
    `${path.relative(process.cwd(), shot.runsPng)}: the runs list\n` +
      `${path.relative(process.cwd(), shot.runPng)}: run ${shot.runId} (${shot.orderRef}), ${shot.shows}\n`,
  );
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
