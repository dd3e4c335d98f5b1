#!/usr/bin/env bash
# Packs the library and compiles a scratch Nest app against the tarball's types (installed by name).
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
npm install --no-audit --no-fund --no-save --offline "$work/$tarball" >/dev/null 2>&1 || npm install --no-audit --no-fund --no-save "$work/$tarball" >/dev/null
for dep in @types/pg @nestjs/common @nestjs/core reflect-metadata rxjs typeorm pg class-validator class-transformer @types/node typescript; do
  [ -e "node_modules/$dep" ] || { mkdir -p "node_modules/$(dirname "$dep")"; ln -s "$root/node_modules/$dep" "node_modules/$dep"; }
done
# The README snippet, verbatim, is the app.
sed -n '/^```ts$/,/^```$/p' "$root/README.md" | sed '1d;$d' > src/app.module.ts
cat > tsconfig.json <<JSON
{ "compilerOptions": { "module": "commonjs", "target": "ES2022", "strict": true, "experimentalDecorators": true,
  "emitDecoratorMetadata": true, "skipLibCheck": false, "noEmit": true, "types": ["node"] }, "include": ["src"] }
JSON
node "$root/node_modules/typescript/bin/tsc" -p tsconfig.json
node -e "const m = require('nestjs-durable-execution'); const t = require('nestjs-durable-execution/testing'); if (typeof m.DurableExecutionModule !== 'function' || !Array.isArray(m.DURABLE_EXECUTION_MIGRATIONS) || typeof t.runWorkerUntilCrash !== 'function') process.exit(1)"
echo "pack check: tarball $tarball installs by name and the README app compiles against its types"
