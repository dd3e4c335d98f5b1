import fc from 'fast-check';
import { Client } from 'pg';
import { SerializationError } from '../../src';
import { decodeStored, encodeValue } from '../../src/util/codec';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 19, "one codec": what a call's value becomes on the first execution (`encodeValue(v).value`)
 * is byte for byte what every replay reads back from PostgreSQL's jsonb (node-postgres' parse, then
 * `decodeStored`), key order included. Generated values: objects with random key orders and unicode
 * keys, index-like keys, nested arrays, -0, undefined fields, dates, toJSON, numbers at the edges.
 */

let db: TestDatabase;
let client: Client;
beforeAll(async () => {
  db = await createTestDatabase('codec');
  client = new Client({ connectionString: db.url });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
  await db?.drop();
});

/** Keys as people and models write them: short, long, unicode, index-like, prototype-ish. */
const key = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.fullUnicodeString({ maxLength: 4 }),
  fc.constantFrom(
    'a',
    'b',
    'ab',
    'ba',
    '10',
    '2',
    '0',
    '01',
    '-1',
    'é',
    'z',
    'Z',
    '__proto__',
    'constructor',
    'toString',
  ),
  fc.nat(5000).map(String),
);
const number = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(-0, 0, 1e21, 1e-7, 5e-324, Number.MAX_SAFE_INTEGER, 2 ** 53 + 2, 0.1 + 0.2, 1.5e300),
);
const leaf = fc.oneof(
  number,
  fc.fullUnicodeString({ maxLength: 8 }).filter((s) => !s.includes('\u0000')),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.date({ min: new Date(0), max: new Date(4102444800000) }),
  fc.integer().map((n) => ({ toJSON: () => ({ wrapped: n, at: 'toJSON' }) })),
  // Boxed primitives: JSON.stringify unwraps them.
  fc.oneof(
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => new Number(n)),
    fc.string({ maxLength: 4 }).map((t) => new String(t)),
    fc.boolean().map((b) => new Boolean(b)),
  ),
);
const value = fc.letrec((tie) => ({
  node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('array'), tie('object')),
  array: fc.array(tie('node'), { maxLength: 5 }),
  object: fc.array(fc.tuple(key, tie('node')), { maxLength: 7 }).map((entries) => {
    const o: Record<string, unknown> = {};
    for (const [k, v] of entries)
      Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
    return o;
  }),
})).node;

/** The value's own key order at every level, and -0 apart from 0. */
function shape(v: unknown): string {
  return JSON.stringify(v, (_k, x) => (Object.is(x, -0) ? '-0' : x));
}

async function throughJsonb(texts: string[]): Promise<unknown[]> {
  const { rows } = await client.query<{ v: unknown }>(
    'select t::jsonb as v from unnest($1::text[]) with ordinality as u(t, i) order by i',
    [texts],
  );
  return rows.map((r) => decodeStored(r.v));
}

describe('one codec: the first execution gets what every replay reads back', () => {
  it('live and replay values are identical, key order included (fast-check, PostgreSQL jsonb)', async () => {
    let compared = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(value, { minLength: 1, maxLength: 20 }), async (values) => {
        const encoded = values.flatMap((v) => {
          try {
            return [encodeValue(v === undefined ? null : v, 'value of a step', 1 << 24)];
          } catch (err) {
            if (err instanceof SerializationError) return []; // refused before anything is stored
            throw err;
          }
        });
        const replayed = await throughJsonb(encoded.map((e) => e.json));
        encoded.forEach((e, i) => expect(shape(replayed[i])).toBe(shape(e.value)));
        compared += encoded.length;
      }),
      { numRuns: 300, seed: 19 },
    );
    expect(compared).toBeGreaterThan(1000);
  });

  it('hands the workflow jsonb key order on the first execution, not the order the body built', () => {
    const live = encodeValue({ second: 'b', first: 'a', 10: 'x', 2: 'y', é: 1, z: 2 }, 'output', 1e6).value;
    expect(Object.keys(live as object)).toEqual(['2', '10', 'z', 'é', 'first', 'second']);
  });

  it('what JSON does applies once, at the boundary: dates, undefined fields, -0, toJSON', () => {
    const live = encodeValue(
      { at: new Date(0), gone: undefined, zero: -0, w: { toJSON: () => 'wrapped' } },
      'output',
      1e6,
    ).value as Record<string, unknown>;
    expect(live).toEqual({ w: 'wrapped', at: '1970-01-01T00:00:00.000Z', zero: 0 });
    expect(Object.is(live.zero, 0)).toBe(true);
  });

  it('refuses a value that serialises to nothing, or whose toJSON throws, with SerializationError', () => {
    expect(() => encodeValue({ toJSON: () => undefined }, 'output of step "x"', 1e6)).toThrow(
      SerializationError,
    );
    expect(() => encodeValue([{ toJSON: () => undefined }], 'output of step "x"', 1e6)).toThrow(
      '$[0] is undefined',
    );
    const throwing = {
      toJSON() {
        throw new TypeError('boom');
      },
    };
    expect(() => encodeValue(throwing, 'output of step "x"', 1e6)).toThrow(SerializationError);
    expect(() => encodeValue(throwing, 'output of step "x"', 1e6)).toThrow('could not be serialised (boom)');
  });
});
