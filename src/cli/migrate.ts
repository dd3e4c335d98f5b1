#!/usr/bin/env node
/*
 * Kept for `node dist/src/cli/migrate.js [--revert]`: the same as `nestjs-durable-execution migrate`
 * (or `revert --all` with --revert). New scripts use the bin (src/cli/main.ts).
 */
import { cli } from './main';

void cli(process.argv.includes('--revert') ? ['revert', '--all'] : ['migrate']).then(
  (code) => (process.exitCode = code),
);
