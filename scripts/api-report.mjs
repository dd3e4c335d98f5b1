// The public API as a checked artefact (docs/API.md).
//   node scripts/api-report.mjs check   (npm run api:check)  fails when etc/*.api.md differ from the code
//   node scripts/api-report.mjs update  (npm run api:update) rewrites them
// Emits the declarations into dist/ (as `npm run build` does; the .js there are left alone), then runs
// API Extractor on the package root (api-extractor.json) and on each subpath in SUBPATHS
// (api-extractor.<name>.json, e.g. api-extractor.fence.json for /fence), sharing one compiler program
// between them.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const { CompilerState, Extractor, ExtractorConfig } = require('@microsoft/api-extractor');

const mode = process.argv[2];
if (mode !== 'check' && mode !== 'update') {
  console.error('usage: node scripts/api-report.mjs check|update');
  process.exit(2);
}
const update = mode === 'update';
const started = Date.now();

const tsc = spawnSync(
  process.execPath,
  [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--emitDeclarationOnly'],
  { cwd: root, stdio: 'inherit' },
);
if (tsc.status !== 0) process.exit(tsc.status ?? 1);

const SUBPATHS = ['testing', 'ai-sdk', 'openai-agents', 'langgraph', 'admin', 'observability', 'fence', 'migrations', 'retention'];
const configs = ['api-extractor.json', ...SUBPATHS.map((name) => `api-extractor.${name}.json`)].map((f) =>
  ExtractorConfig.loadFileAndPrepare(join(root, f)),
);
const compilerState = CompilerState.create(configs[0], {
  additionalEntryPoints: configs.slice(1).map((c) => c.mainEntryPointFilePath),
});

const changed = [];
let failed = false;
for (const config of configs) {
  const result = Extractor.invoke(config, {
    localBuild: update,
    compilerState,
    printApiReportDiff: !update,
    messageCallback: (message) => {
      // API Extractor's own advice ("copy the file, or perform a local build") is replaced below.
      if (message.messageId === 'console-api-report-not-copied') message.handled = true;
    },
  });
  if (result.apiReportChanged) changed.push(config.reportConfigs[0].fileName);
  if (!result.succeeded) failed = true;
}

const seconds = ((Date.now() - started) / 1000).toFixed(1);
if (update) {
  console.log(
    changed.length
      ? `api:update: rewrote etc/${changed.join(', etc/')} (${seconds} s). Review \`git diff etc/\` and record the change in CHANGELOG.md under Unreleased.`
      : `api:update: the API reports are up to date (${seconds} s).`,
  );
  process.exit(failed ? 1 : 0);
}
if (changed.length) {
  console.error(
    `\napi:check: the public API no longer matches etc/${changed.join(', etc/')} (diff above).\n` +
      'If the change is intended, run `npm run api:update`, review `git diff etc/`, commit the report\n' +
      'with the change, and record it in CHANGELOG.md under Unreleased (docs/API.md). If it is not\n' +
      'intended, something internal became public, or a public signature moved: fix the code.',
  );
  process.exit(1);
}
if (failed) {
  console.error('\napi:check: API Extractor reported warnings or errors (above).');
  process.exit(1);
}
console.log(`api:check: the public API matches etc/*.api.md (${seconds} s).`);
