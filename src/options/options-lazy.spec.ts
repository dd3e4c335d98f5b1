import 'reflect-metadata';

/**
 * What a worker does not load (issue 47, boot like a plain Nest app): the root entry point loads
 * neither class-validator, class-transformer nor the migration classes, and resolving valid options
 * does not either; options with a problem load class-validator, which words it.
 */
describe('the root entry point, lazily', () => {
  const LAZY = ['class-validator', 'class-transformer', '../../migrations'];
  afterEach(() => {
    for (const m of LAZY) jest.dontMock(m);
  });

  it('loads no class-validator, class-transformer or migrations, nor does a valid boot', () => {
    jest.isolateModules(() => {
      for (const m of LAZY)
        jest.doMock(m, () => {
          throw new Error(`${m} was loaded`);
        });
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const root = require('../index') as typeof import('../index');
      expect(typeof root.DurableExecutionModule).toBe('function');
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { resolveOptions } = require('./resolve-options') as typeof import('./resolve-options');
      const resolved = resolveOptions({
        database: { url: 'postgres://u@h:5432/db', migrationsRun: false },
        worker: { concurrency: 4 },
      });
      expect(resolved.worker.concurrency).toBe(4);
      expect(() =>
        resolveOptions({ database: { url: 'postgres://u@h:5432/db' }, worker: { concurrency: 0 } }),
      ).toThrow(/^class-(validator|transformer) was loaded$/);
    });
  });

  it('words a problem with class-validator, loaded then', () => {
    jest.isolateModules(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { resolveOptions } = require('./resolve-options') as typeof import('./resolve-options');
      expect(() =>
        resolveOptions({ database: { url: 'postgres://u@h:5432/db' }, worker: { concurrency: 0 } }),
      ).toThrow('worker.concurrency: concurrency must not be less than 1');
    });
  });
});
