import 'reflect-metadata';
import { failure, URL } from '../../test/helpers/options';
import { resolveOptions } from './resolve-options';

/** `database.directUrl` and `database.preparedStatements`: the options for a pool behind PgBouncer. */
describe('resolveOptions: a pool behind a pooler', () => {
  it('defaults: named prepared statements, no direct connection', () => {
    const { database } = resolveOptions({ database: { url: URL } });
    expect(database.preparedStatements).toBe(true);
    expect(database.directUrl).toBeUndefined();
  });

  it('keeps both when given, with any database source', () => {
    const direct = 'postgres://root@127.0.0.1:5432/test';
    const pooled = 'postgres://root@127.0.0.1:6432/test';
    const { database } = resolveOptions({
      database: { url: pooled, directUrl: direct, preparedStatements: false },
    });
    expect(database).toMatchObject({ url: pooled, directUrl: direct, preparedStatements: false });
    expect(
      resolveOptions({ database: { dataSourceName: 'default', directUrl: direct } }).database.directUrl,
    ).toBe(direct);
  });

  it.each([
    [
      'not a URL',
      'no url here',
      'database.directUrl: is not a URL; give postgres://user:password@host:5432/database',
    ],
    [
      'another protocol',
      'mysql://root@127.0.0.1/x',
      'database.directUrl: must be a postgres:// or postgresql:// URL; got mysql:// (give postgres://user:password@host:5432/database)',
    ],
    ['empty', '', 'database.directUrl: directUrl must be longer than or equal to 1 characters'],
    ['a number', 5432, 'database.directUrl: directUrl must be a string'],
  ])('refuses a directUrl that is %s, naming the field', (_label, directUrl, problem) => {
    expect(failure({ database: { url: URL, directUrl } }).problems).toContain(problem);
  });

  it('refuses a preparedStatements that is not a boolean, naming the field', () => {
    expect(failure({ database: { url: URL, preparedStatements: 'no' } }).problems).toEqual([
      'database.preparedStatements: preparedStatements must be a boolean value',
    ]);
  });

  it('never quotes the direct URL (it may hold a password)', () => {
    const problems = failure({ database: { url: URL, directUrl: 'http://u:secret@h/x' } }).problems;
    expect(problems.join('\n')).not.toContain('secret');
  });
});
