import { loadedOptional, tryLoadOptional } from './optional-dependency';

describe('loadedOptional', () => {
  it('never loads a package this process has not loaded: undefined, and it stays unloaded', () => {
    // `xtend` is installed (pg-types depends on it) and nothing in this spec requires it.
    const path = require.resolve('xtend');
    expect(require.cache[path]).toBeUndefined();
    expect(loadedOptional('xtend')).toBeUndefined();
    expect(require.cache[path]).toBeUndefined();
  });

  it('returns a package already loaded, the same module as require gives', () => {
    const pg = tryLoadOptional<object>('pg');
    expect(pg).toBeDefined();
    expect(loadedOptional('pg')).toBe(pg);
  });

  it('is undefined for a package that is not installed', () => {
    expect(loadedOptional('nestjs-durable-execution-no-such-package')).toBeUndefined();
  });
});
