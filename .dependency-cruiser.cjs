/* global module */
/**
 * The layering of src/, checked by `npm run lint` (dependency-cruiser). Lower layers never import
 * higher ones; see docs/ARCHITECTURE.md ("Layers"). Type-only imports count too: a layer that needs a
 * higher layer's type has that type in the wrong place.
 */
const BASE = '^src/(errors|util|interfaces|options)/|^src/durable-execution[.]constants[.]ts$';
const layer = (name) => `^src/${name}/`;
const notIn = (...names) => `^src/(${names.join('|')})/|^src/(?!durable-execution[.]constants)[^/]+[.]ts$`;

/** Each layer with the folders of src/ it must not import (root files are the module wiring). */
const LAYERS = [
  { name: 'base', path: BASE, forbidden: `^src/(?!(errors|util|interfaces|options)/|durable-execution[.]constants[.]ts$)` },
  { name: 'store', path: layer('store'), forbidden: notIn('engine', 'api', 'maintenance', 'decorators', 'discovery', 'nest', 'observability', 'admin', 'testing', 'cli') },
  { name: 'engine', path: layer('engine'), forbidden: notIn('api', 'maintenance', 'decorators', 'discovery', 'nest', 'observability', 'admin', 'testing', 'cli') },
  { name: 'decorators', path: layer('decorators'), forbidden: notIn('api', 'maintenance', 'discovery', 'nest', 'observability', 'admin', 'testing', 'cli') },
  { name: 'discovery', path: layer('discovery'), forbidden: notIn('api', 'maintenance', 'nest', 'observability', 'admin', 'testing', 'cli') },
  { name: 'api', path: layer('api'), forbidden: notIn('maintenance', 'decorators', 'discovery', 'nest', 'observability', 'admin', 'testing', 'cli') },
  { name: 'maintenance', path: layer('maintenance'), forbidden: notIn('api', 'decorators', 'discovery', 'nest', 'observability', 'admin', 'testing', 'cli') },
  { name: 'nest', path: layer('nest'), forbidden: notIn('store', 'engine', 'api', 'maintenance', 'decorators', 'discovery', 'observability', 'admin', 'testing', 'cli') },
  { name: 'observability', path: layer('observability'), forbidden: notIn('maintenance', 'decorators', 'discovery', 'admin', 'testing', 'cli') },
  { name: 'admin', path: layer('admin'), forbidden: notIn('maintenance', 'decorators', 'discovery', 'testing', 'cli') },
];

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle: split the shared part out, or move it down a layer.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...LAYERS.map((l) => ({
      name: `layer-${l.name}`,
      severity: 'error',
      comment: `src/ layering: ${l.name} must not import a higher layer (see docs/ARCHITECTURE.md, "Layers").`,
      from: { path: l.path, pathNot: '[.]spec[.]ts$' },
      to: { path: l.forbidden },
    })),
    {
      name: 'only-the-store-talks-to-the-database',
      severity: 'error',
      comment: 'Only src/store/ uses pg, typeorm or DurableDatabase; the module wiring and the CLI hand them over.',
      from: { path: '^src/', pathNot: '^src/store/|^src/[^/]+[.]ts$|^src/cli/|[.]spec[.]ts$' },
      to: { path: '^node_modules/(pg|typeorm)/|^src/store/durable-database[.]ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'ai-sdk-public-api-only',
      severity: 'error',
      comment:
        'src/ai-sdk (the nestjs-durable-execution/ai-sdk subpath) builds on the public API only: src/index.ts (and src/agent-shared, built on it too).',
      from: { path: '^src/ai-sdk/' },
      to: { path: '^src/(?!ai-sdk/|agent-shared/|index[.]ts$)' },
    },
    {
      name: 'openai-agents-public-api-only',
      severity: 'error',
      comment:
        'src/openai-agents (the nestjs-durable-execution/openai-agents subpath) builds on the public API only: src/index.ts (and src/agent-shared, built on it too).',
      from: { path: '^src/openai-agents/' },
      to: { path: '^src/(?!openai-agents/|agent-shared/|index[.]ts$)' },
    },
    {
      name: 'agent-shared-public-api-only',
      severity: 'error',
      comment:
        'src/agent-shared (what the ai-sdk and openai-agents subpaths share, no subpath of its own) builds on the public API only: src/index.ts.',
      from: { path: '^src/agent-shared/' },
      to: { path: '^src/(?!agent-shared/|index[.]ts$)' },
    },
    {
      name: 'agent-shared-for-the-agent-subpaths-only',
      severity: 'error',
      comment: 'Only src/ai-sdk and src/openai-agents use src/agent-shared: the core and the other subpaths do not.',
      from: { path: '^src/', pathNot: '^src/(ai-sdk|openai-agents|agent-shared)/' },
      to: { path: '^src/agent-shared/' },
    },
    {
      name: 'langgraph-public-api-only',
      severity: 'error',
      comment:
        'src/langgraph (the nestjs-durable-execution/langgraph subpath) builds on the public API only: src/index.ts, and the error it throws (src/errors/foreign-thread.error.ts, exported by the subpath).',
      from: { path: '^src/langgraph/' },
      to: { path: '^src/(?!langgraph/|index[.]ts$|errors/foreign-thread[.]error[.]ts$)' },
    },
    {
      name: 'fence-loads-no-driver',
      severity: 'error',
      comment:
        'src/fence (the nestjs-durable-execution/fence subpath) is imported by target services alone: nothing it reaches may load the package root, the engine or the store, nor typeorm or pg (test/pack/check-pack.sh checks the same at run time).',
      from: { path: '^src/fence/' },
      to: {
        path: '^src/(index[.]ts$|store/|engine/|api/|maintenance/|admin/|observability/)|^node_modules/(typeorm|pg|@nestjs/typeorm)/',
        reachable: true,
      },
    },
    {
      name: 'subpath-entries-are-entries',
      severity: 'error',
      comment:
        "A subpath's index (the package root's too) is for the package's users: the library's own modules import what they need from its file, never through an entry (that would load the whole entry, and make cycles).",
      from: { path: '^src/', pathNot: '[.]spec[.]ts$|^src/(ai-sdk|openai-agents|agent-shared|langgraph)/' },
      to: { path: '^src/((admin|observability|fence|migrations|maintenance/retention|testing|ai-sdk|openai-agents|langgraph)/)?index[.]ts$' },
    },
    {
      name: 'not-to-test',
      severity: 'error',
      comment: 'The library never imports test code.',
      from: { path: '^src/', pathNot: '[.]spec[.]ts$' },
      to: { path: '^test/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '^(dist|node_modules)/' },
  },
};
