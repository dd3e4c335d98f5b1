#!/usr/bin/env bash
# Packs the library and compiles a scratch Nest app against the tarball's types (installed by name): the
# README's ```ts block, and every ```ts block of docs/EXISTING-APP.md as its own file (named by the
# block's first-line comment, e.g. `// src/app.module.ts`), under moduleResolution node (typesVersions)
# with isolatedModules (the `import type` rule for decorated signatures). Packs dist/ as built: run
# `npm run build` first.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$root"
tarball="$(npm pack --silent --pack-destination "$work" | tail -1)"
mkdir -p "$work/app/src"
cd "$work/app"
cat > package.json <<JSON
{ "name": "scratch-app", "version": "1.0.0", "private": true }
JSON
# Reuse the repo's installed peers instead of downloading them again.
ln -s "$root/node_modules" node_modules.peers
# @nestjs/config: docs/EXISTING-APP.md configures the module from ConfigService (not a dev dependency).
npm install --no-audit --no-fund --no-save --offline "$work/$tarball" @nestjs/config >/dev/null 2>&1 ||
  npm install --no-audit --no-fund --no-save "$work/$tarball" @nestjs/config >/dev/null
for dep in @types/pg @nestjs/common @nestjs/core @nestjs/schedule @nestjs/typeorm @nestjs/testing reflect-metadata rxjs typeorm pg class-validator class-transformer @types/node typescript ai @ai-sdk/openai-compatible zod @openai/agents @langchain/core @langchain/langgraph @langchain/langgraph-checkpoint; do
  [ -e "node_modules/$dep" ] || { mkdir -p "node_modules/$(dirname "$dep")"; ln -s "$root/node_modules/$dep" "node_modules/$dep"; }
done
# The README snippet, verbatim, is the app.
sed -n '/^```ts$/,/^```$/p' "$root/README.md" | sed '1d;$d' > src/app.module.ts
# The guide's blocks, each a file of a second app (they import each other by path).
guide="$work/app/guide"
mkdir -p "$guide"
awk -v dir="$guide" '
  /^```ts$/ { inblock = 1; n++; file = ""; buf = ""; next }
  inblock && /^```$/ {
    if (file == "") file = "block-" n ".ts"
    out = dir "/" file; sub(/\/[^\/]*$/, "", out); system("mkdir -p \"" out "\"")
    printf "%s", buf > (dir "/" file); close(dir "/" file); inblock = 0; next
  }
  inblock {
    if (buf == "" && match($0, /^\/\/ [A-Za-z0-9_.\/-]+\.ts$/)) file = substr($0, 4)
    buf = buf $0 "\n"
  }
' "$root/docs/EXISTING-APP.md"
[ -n "$(find "$guide" -name '*.ts')" ] || { echo "no \`\`\`ts block found in docs/EXISTING-APP.md" >&2; exit 1; }
cat > tsconfig.json <<JSON
{ "compilerOptions": { "module": "commonjs", "moduleResolution": "node", "target": "ES2022", "strict": true, "experimentalDecorators": true,
  "emitDecoratorMetadata": true, "isolatedModules": true, "skipLibCheck": false, "noEmit": true, "types": ["node"] },
  "include": ["src", "guide"] }
JSON
node "$root/node_modules/typescript/bin/tsc" -p tsconfig.json
# The subpath through package.json "exports" too (moduleResolution node16).
mkdir -p node16
printf '%s\n' "import { runWorkerUntilCrash } from 'nestjs-durable-execution/testing';" \
  "import type { DurableEventType } from 'nestjs-durable-execution';" \
  "import { durableModel, durableTools } from 'nestjs-durable-execution/ai-sdk';" \
  "export const kit: [typeof runWorkerUntilCrash, DurableEventType] = [runWorkerUntilCrash, 'run.claimed'];" \
  "export const aiSdk: [typeof durableModel, typeof durableTools] = [durableModel, durableTools];" > node16/index.ts
node "$root/node_modules/typescript/bin/tsc" --module node16 --moduleResolution node16 --target ES2022 --strict \
  --noEmit --types node node16/index.ts
node -e "const m = require('nestjs-durable-execution'); const t = require('nestjs-durable-execution/testing'); if (typeof m.DurableExecutionModule !== 'function' || typeof t.runWorkerUntilCrash !== 'function') process.exit(1); const a = require('nestjs-durable-execution/ai-sdk'); if (typeof a.durableModel !== 'function' || typeof a.durableTools !== 'function') process.exit(1)"
# The opt-in subpaths (docs/API.md): their types through "exports" (node16) and their modules. Each name is
# asserted present in its subpath and absent from the root (a 0.x move, no root re-exports).
mkdir -p node16-sub
printf '%s\n' "import { ApiKeyAdminGuard, DurableAdminModule, type AdminRunPage } from 'nestjs-durable-execution/admin';" \
  "import { DurableObservabilityModule, DurableObservers, type DurableObserver } from 'nestjs-durable-execution/observability';" \
  "import { DurableFenceGuard, FenceVerifier, fenceHeaders, parseFence, type FenceToken } from 'nestjs-durable-execution/fence';" \
  "import { DURABLE_EXECUTION_MIGRATIONS, runDurableMigrations, type DurableMigrationClass } from 'nestjs-durable-execution/migrations';" \
  "import { DurableRetentionModule, type DurableRetentionOptions } from 'nestjs-durable-execution/retention';" \
  "export type Page = AdminRunPage; export type Observer = DurableObserver; export type Token = FenceToken;" \
  "export type Migration = DurableMigrationClass; export type Retention = DurableRetentionOptions;" \
  "export const subpaths = [ApiKeyAdminGuard, DurableAdminModule, DurableObservabilityModule, DurableObservers, DurableFenceGuard, FenceVerifier, fenceHeaders, parseFence, DURABLE_EXECUTION_MIGRATIONS, runDurableMigrations, DurableRetentionModule];" > node16-sub/index.ts
node "$root/node_modules/typescript/bin/tsc" --module node16 --moduleResolution node16 --target ES2022 --strict \
  --noEmit --types node --experimentalDecorators node16-sub/index.ts
node -e "
const root = require('nestjs-durable-execution');
const entries = {
  admin: ['DurableAdminModule', 'ApiKeyAdminGuard', 'addDurableAdminSecurity', 'isDurableAdminAction', 'DURABLE_OPERATOR'],
  observability: ['DurableObservabilityModule', 'DurableObservers', 'DurableHealthIndicator', 'DATABASE_UNREACHABLE', 'MissingDependencyError'],
  fence: ['FenceVerifier', 'DurableFenceGuard', 'DurableFenceToken', 'parseFence', 'fenceHeaders', 'signFence', 'StaleFenceError'],
  migrations: ['DURABLE_EXECUTION_MIGRATIONS', 'durableExecutionMigrations', 'runDurableMigrations', 'revertDurableMigrations', 'SchemaConflictError'],
  retention: ['DurableRetentionModule', 'DurableRetention'],
};
for (const [sub, names] of Object.entries(entries)) {
  const m = require('nestjs-durable-execution/' + sub);
  for (const n of names) {
    if (m[n] === undefined) { console.error('pack check: nestjs-durable-execution/' + sub + ' does not export ' + n); process.exit(1); }
    if (n in root) { console.error('pack check: the package root still exports ' + n + ' (moved to /' + sub + ')'); process.exit(1); }
  }
}"
# One copy of each class whichever entry loads it (the entries share dist/bundle.js, scripts/bundle.mjs):
# the admin module's providers inject the very RunRepository, CommandGateway... the root exports (DI tokens).
node -e "
require('reflect-metadata');
const root = require('nestjs-durable-execution');
const admin = require('nestjs-durable-execution/admin');
const m = admin.DurableAdminModule.forRoot({ path: 'ops', observability: false, guard: new admin.ApiKeyAdminGuard({ keys: { ['k'.repeat(20)]: 'oncall' } }) });
const classes = [...(m.providers || []), ...(m.controllers || [])].map((p) => p.useClass || p).filter((p) => typeof p === 'function');
let shared = 0;
for (const c of classes) for (const t of Reflect.getMetadata('design:paramtypes', c) || []) {
  if (!t || !(t.name in root)) continue;
  if (t !== root[t.name]) { console.error('pack check: ' + c.name + ' injects a second copy of ' + t.name); process.exit(1); }
  shared++;
}
if (shared < 3) { console.error('pack check: the admin module injects ' + shared + ' classes of the root: it checks nothing'); process.exit(1); }"
# Named imports from ESM (Node reads each entry's export names from its stub).
node --input-type=module -e "
import { DurableExecutionModule, RunRepository, DurableStep } from 'nestjs-durable-execution';
import { runWorkerUntilCrash } from 'nestjs-durable-execution/testing';
import { FenceVerifier } from 'nestjs-durable-execution/fence';
if (![DurableExecutionModule, RunRepository, DurableStep, runWorkerUntilCrash, FenceVerifier].every((f) => typeof f === 'function')) process.exit(1);
if (RunRepository.name !== 'RunRepository') { console.error('pack check: class names changed by the bundle'); process.exit(1); }"
# /fence in a process of its own, as a target service loads it: neither the package root nor a driver.
node -e "
const f = require('nestjs-durable-execution/fence');
if (typeof f.FenceVerifier !== 'function' || typeof f.DurableFenceGuard !== 'function') process.exit(1);
const loaded = Object.keys(require.cache);
const heavy = loaded.filter((p) => /[\\/]node_modules[\\/](typeorm|pg|@nestjs[\\/]typeorm)[\\/]/.test(p) || /nestjs-durable-execution[\\/]dist[\\/]src[\\/]index[.]js$/.test(p));
if (heavy.length) { console.error('pack check: nestjs-durable-execution/fence loaded ' + heavy.join(', ')); process.exit(1); }
if (!loaded.some((p) => /[\\/]node_modules[\\/]@nestjs[\\/]common[\\/]/.test(p))) { console.error('pack check: the /fence probe saw no @nestjs/common in require.cache: it checks nothing'); process.exit(1); }"
# The /openai-agents subpath: its types (with skipLibCheck: @openai/agents-openai 0.20's own .d.ts fail
# TS1542 under node16 without it) and its module, which loads nothing of @openai/agents until a call.
mkdir -p node16-oa
printf '%s\n' "import { durableAgent, durableAgentTools, durableModelProvider } from 'nestjs-durable-execution/openai-agents';" \
  "export const oa: [typeof durableAgent, typeof durableAgentTools, typeof durableModelProvider] = [durableAgent, durableAgentTools, durableModelProvider];" > node16-oa/index.ts
node "$root/node_modules/typescript/bin/tsc" --module node16 --moduleResolution node16 --target ES2022 --strict \
  --noEmit --types node --skipLibCheck node16-oa/index.ts
node -e "const o = require('nestjs-durable-execution/openai-agents'); if (typeof o.durableAgent !== 'function' || typeof o.durableModelProvider !== 'function' || typeof o.durableAgentTools !== 'function') process.exit(1)"
# The /langgraph subpath: its types (skipLibCheck, as above, for the LangChain packages' own .d.ts) and its
# module, which loads @langchain/langgraph-checkpoint's CommonJS build (@langchain/langgraph on first runGraph).
mkdir -p node16-lg
printf '%s\n' "import { DurablePostgresSaver, graphCommand, runGraph } from 'nestjs-durable-execution/langgraph';" \
  "export const lg: [typeof DurablePostgresSaver, typeof graphCommand, typeof runGraph] = [DurablePostgresSaver, graphCommand, runGraph];" > node16-lg/index.ts
node "$root/node_modules/typescript/bin/tsc" --module node16 --moduleResolution node16 --target ES2022 --strict \
  --noEmit --types node --skipLibCheck node16-lg/index.ts
node -e "const l = require('nestjs-durable-execution/langgraph'); if (typeof l.DurablePostgresSaver !== 'function' || typeof l.runGraph !== 'function' || typeof l.graphCommand !== 'function') process.exit(1)"
# The integration guides' ```ts blocks, as written (imports and definitions included), each a file, through
# the subpaths' "exports" (node16; skipLibCheck for the SDKs' own .d.ts, as above).
mkdir -p integrations
for doc in AI-SDK OPENAI-AGENTS LANGGRAPH; do
  n=0
  while IFS= read -r -d '' block; do
    n=$((n + 1)); printf '%s' "$block" > "integrations/$doc-$n.ts"
  done < <(awk '/^```ts$/ { inb = 1; buf = ""; next } inb && /^```$/ { printf "%s%c", buf, 0; inb = 0; next } inb { buf = buf $0 "\n" }' "$root/docs/$doc.md")
done
if [ -n "$(ls integrations)" ]; then
  node "$root/node_modules/typescript/bin/tsc" --module node16 --moduleResolution node16 --target ES2022 --strict \
    --noEmit --types node --skipLibCheck --experimentalDecorators --emitDecoratorMetadata integrations/*.ts
fi
# The bin is linked by npm and runs: --help exits 0, an unknown command exits 2.
./node_modules/.bin/nestjs-durable-execution --help | grep -q 'Usage: nestjs-durable-execution'
set +e; ./node_modules/.bin/nestjs-durable-execution bogus 2>/dev/null; code=$?; set -e
[ "$code" -eq 2 ] || { echo "pack check: the bin exited $code on an unknown command, not 2" >&2; exit 1; }
echo "pack check: tarball $tarball installs by name; the README app, docs/EXISTING-APP.md ($(find "$guide" -name '*.ts' | wc -l) files) and the integration guides ($(ls integrations | wc -l) blocks) compile against its types; the bin runs"
