// The validation suite of @langchain/langgraph-checkpoint-validation against DurablePostgresSaver, as its
// `validate-checkpointer` CLI would run it (that CLI fails to load any initializer in 1.1.1: its runner
// imports a schema its types module does not export). The initializer is TypeScript of this repository,
// loaded through ts-node (transpile only) in CommonJS like the library; the suite itself runs as ESM.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { validate } from '@langchain/langgraph-checkpoint-validation';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
require('ts-node').register({ transpileOnly: true, project: path.join(here, '..', '..', 'tsconfig.json') });
const initializer = require('./validation-initializer.ts').default;

validate(initializer);
