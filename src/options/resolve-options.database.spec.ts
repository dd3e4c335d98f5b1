import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { failure, URL } from '../../test/helpers/options';
import { resolveOptions } from './resolve-options';

/** resolveOptions refuses a bad `database` group: none, two sources, an empty one, a foreign DataSource. */
describe('resolveOptions', () => {
  describe('errors', () => {
    it.each([
      ['missing', {}],
      ['null', { database: null }],
    ])('requires database (%s)', (_label, raw) => {
      expect(failure(raw).problems).toEqual([
        'database: database is required: give { url } or { dataSourceName } or { dataSource }',
      ]);
    });

    it('refuses a database that is not an object (a bare url string)', () => {
      expect(failure({ database: URL }).problems).toEqual([
        'database: must be an object, { url } or { dataSourceName } or { dataSource }; got string',
      ]);
    });

    it.each([
      ['url and dataSourceName', { url: URL, dataSourceName: 'default' }, 'url and dataSourceName'],
      [
        'url and dataSource',
        { url: URL, dataSource: new DataSource({ type: 'postgres', url: URL }) },
        'url and dataSource',
      ],
      [
        'all three',
        { url: URL, dataSourceName: 'x', dataSource: new DataSource({ type: 'postgres', url: URL }) },
        'url and dataSourceName and dataSource',
      ],
    ])('refuses two database sources (%s) and names them', (_label, database, named) => {
      expect(failure({ database }).problems).toEqual([
        `database: give exactly one of url, dataSourceName or dataSource; got ${named}`,
      ]);
    });

    it.each([
      ['empty', {}],
      ['an unset env variable', { url: undefined }],
      ['null', { url: null }],
    ])('refuses a database with no source (%s)', (_label, database) => {
      expect(failure({ database }).problems).toEqual([
        'database: give exactly one of url, dataSourceName or dataSource; got none (is the variable holding the url set?)',
      ]);
    });

    it('refuses an empty url and an empty dataSourceName', () => {
      expect(failure({ database: { url: '' } }).problems).toEqual([
        'database.url: url must be longer than or equal to 1 characters',
      ]);
      expect(failure({ database: { dataSourceName: '' } }).problems).toEqual([
        'database.dataSourceName: dataSourceName must be longer than or equal to 1 characters',
      ]);
    });

    it.each([
      ['a number', 5],
      ['a plain object', { options: { type: 'postgres' } }],
    ])('refuses a dataSource that is not a TypeORM DataSource (%s)', (_label, dataSource) => {
      expect(failure({ database: { dataSource } }).problems).toEqual([
        'database.dataSource: must be a TypeORM DataSource instance',
      ]);
    });

    it('refuses a DataSource of another database type', () => {
      // A real MySQL DataSource needs the mysql driver installed; its shape is all that is checked.
      const dataSource = Object.assign(Object.create(DataSource.prototype), {
        options: { type: 'mysql', url: 'mysql://root@127.0.0.1/x' },
      });
      expect(dataSource).toBeInstanceOf(DataSource);
      expect(failure({ database: { dataSource } }).problems).toEqual([
        "database.dataSource: must be a PostgreSQL DataSource (options.type 'postgres'); got 'mysql'",
      ]);
    });

    it.each([
      ['uppercase', 'Durable'],
      ['a dash', 'durable-exec'],
      ['a dot (a qualified name)', 'app.durable'],
      ['a quote', 'a"b'],
      ['a leading digit', '1durable'],
      ['the reserved pg_ prefix', 'pg_durable'],
      ['64 characters', 'd'.repeat(64)],
      ['empty', ''],
    ])('refuses a schema that is not a plain identifier (%s), naming database.schema', (_label, schema) => {
      expect(failure({ database: { url: URL, schema } }).problems).toEqual([
        `database.schema: must be a plain PostgreSQL identifier: lowercase letters, digits and _, starting with a letter or _, at most 63 characters, not starting with pg_, not information_schema; got '${schema}'`,
      ]);
    });

    it('refuses a schema that is not a string', () => {
      expect(failure({ database: { url: URL, schema: 7 } }).problems).toEqual([
        'database.schema: must be a plain PostgreSQL identifier: lowercase letters, digits and _, starting with a letter or _, at most 63 characters, not starting with pg_, not information_schema; got number',
      ]);
    });
  });

  describe('schema', () => {
    it.each(['durable', '_x', 'a1_b2', 'public', 'd'.repeat(63)])('accepts %s', (schema) => {
      expect(resolveOptions({ database: { url: URL, schema } }).database.schema).toBe(schema);
    });

    it('defaults to public, also for null', () => {
      expect(resolveOptions({ database: { url: URL } }).database.schema).toBe('public');
      expect(resolveOptions({ database: { url: URL, schema: null as never } }).database.schema).toBe(
        'public',
      );
    });
  });
});
