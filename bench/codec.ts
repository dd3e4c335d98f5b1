/**
 * `npm run bench:codec`: the CPU cost of the one codec (issue 19) on a step commit, in one process,
 * side by side: `JSON.parse(JSON.stringify(v))` (the round trip the first execution made before), the
 * same plus jsonb's key order (`decodeStored`: a walk, and a re-encode when a body built its keys in
 * another order), and `encodeValue` (the commit's whole encode: validation walk, stringify, parse, key
 * order). Prints ops/s and microseconds per value. No database: a step commit also costs one round trip.
 */
import { performance } from 'node:perf_hooks';
import { decodeStored, encodeValue } from '../src/util/codec';

const shapes: Record<string, unknown> = {
  'small object': { ok: true, n: 3 },
  'model response': {
    id: 'chatcmpl-123',
    usage: { prompt_tokens: 14000, completion_tokens: 300, total_tokens: 14300 },
    choices: [
      {
        message: {
          role: 'assistant',
          tool_calls: [{ id: 'call_1', function: { name: 'submit', arguments: '{"a":1}' } }],
        },
      },
    ],
  },
  '240-line quote': {
    totalCents: 123456,
    currency: 'EUR',
    lineItems: Array.from({ length: 240 }, (_, i) => ({
      sku: `SKU-${i}`,
      qty: (i % 7) + 1,
      priceCents: 100 + i,
    })),
  },
  'tool-call map': Object.fromEntries(
    ['second', 'first', 'zeta', 'alpha', 'b', 'a'].map((k, i) => [k, { i }]),
  ),
};

function opsPerSecond(fn: () => unknown, ms = 600): number {
  for (let i = 0; i < 100; i++) fn();
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    for (let i = 0; i < 10; i++) fn();
    n += 10;
  }
  return (n * 1000) / (performance.now() - t0);
}

const us = (ops: number) => `${(1e6 / ops).toFixed(1).padStart(7)} µs`;
for (const [name, v] of Object.entries(shapes)) {
  const roundTrip = opsPerSecond(() => JSON.parse(JSON.stringify(v)));
  const ordered = opsPerSecond(() => decodeStored(JSON.parse(JSON.stringify(v))));
  const encode = opsPerSecond(() => encodeValue(v, 'output', 1 << 24));
  console.log(
    `${name.padEnd(15)} round trip ${us(roundTrip)}   + key order ${us(ordered)}   encodeValue ${us(encode)}   (encodeValue ÷ round trip: ${(roundTrip / encode).toFixed(1)}×)`,
  );
}
